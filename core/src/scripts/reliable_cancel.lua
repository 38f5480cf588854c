-- Cancel a message that no consumer has received yet (delayed, or ready) by id.
-- KEYS, ARGV[1], ARGV[2]: see reliable_lib.lua.
-- ARGV[3] id
-- Returns 1 when a message was removed, 0 when there was none (unknown id, or in flight,
-- or dead).
local err = wrong_type_with_wheels(WHEEL, 'zset', NEAR, 'zset', READY, 'stream', IDS, 'hash', META, 'hash')
if err then return err end
local attempts, flags = take_delayed(ARGV[3])
if attempts then
  if flags == INDEXED then redis.call('HDEL', IDS, ARGV[3]) end
  return 1
end
if take_ready(ARGV[3]) then
  redis.call('HDEL', IDS, ARGV[3])
  return 1
end
return 0
