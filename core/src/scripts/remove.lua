-- Remove the first waiting entry holding a value.
-- KEYS[1] queue list, KEYS[2] timeout set
-- ARGV[1] value
-- Returns 1 when an entry was removed, else 0.
local err = wrong_type(KEYS[1], 'list', KEYS[2], 'zset')
if err then return err end
for _, entry in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
  if unpack_value(entry) == ARGV[1] then
    redis.call('LREM', KEYS[1], 1, entry)
    redis.call('ZREM', KEYS[2], entry)
    return 1
  end
end
return 0
