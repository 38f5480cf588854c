-- Delete every waiting entry of a delayed queue (not the destination), as Redisson's
-- delete() does.
-- KEYS[1] queue list, KEYS[2] timeout set
-- Returns the number of keys deleted.
local err = wrong_type(KEYS[1], 'list', KEYS[2], 'zset')
if err then return err end
return redis.call('DEL', KEYS[1], KEYS[2])
