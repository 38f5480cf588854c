-- Cancel a delayed message by id.
-- KEYS, ARGV[1], ARGV[2]: see reliable_lib.lua.
-- ARGV[3] id
-- Returns 1 when a delayed message was removed, 0 when there was none (unknown id, or
-- already ready, in flight or dead).
local err = wrong_type(WHEEL, 'zset', NEAR, 'zset', IDS, 'hash', META, 'hash')
if err then return err end
local attempts, flags = take_delayed(ARGV[3])
if not attempts then return 0 end
if flags == INDEXED then redis.call('HDEL', IDS, ARGV[3]) end
return 1
