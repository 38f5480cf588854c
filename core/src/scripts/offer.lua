-- Offer entries to a Redisson-compatible delayed queue.
-- KEYS[1] timeout set (zset), KEYS[2] queue list, KEYS[3] channel, KEYS[4] destination list
-- ARGV    triples: delay ms, id, value
-- Returns the due time (server ms) of each entry, in order. Publishes the new earliest
-- due time when the batch moved it earlier, so that every scheduler (Redisson's too) wakes.
local err = wrong_type(KEYS[1], 'zset', KEYS[2], 'list', KEYS[4], 'list')
if err then return err end
local now = now_ms()
local before = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local due = {}
local packed = {}
for i = 1, #ARGV, 3 do
  local at = now + tonumber(ARGV[i])
  local entry = struct.pack('Bc0Lc0', #ARGV[i + 1], ARGV[i + 1], #ARGV[i + 2], ARGV[i + 2])
  redis.call('ZADD', KEYS[1], at, entry)
  packed[#packed + 1] = entry
  due[#due + 1] = at
end
call_chunked('RPUSH', KEYS[2], packed)
local after = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if before[1] == nil or tonumber(after[2]) < tonumber(before[2]) then
  redis.call('PUBLISH', KEYS[3], ms_string(tonumber(after[2])))
end
return due
