-- Whether a delayed queue holds a value that is still waiting.
-- KEYS[1] queue list, KEYS[2] timeout set (only its type is checked)
-- ARGV[1] value
-- Returns 1 or 0.
local err = wrong_type(KEYS[1], 'list', KEYS[2], 'zset')
if err then return err end
for _, entry in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
  if unpack_value(entry) == ARGV[1] then return 1 end
end
return 0
