-- Offer entries to a Redisson-compatible delayed queue.
-- KEYS[1] timeout set (zset), KEYS[2] queue list, KEYS[3] channel, KEYS[4] destination list,
-- KEYS[5] (optional) this call's token key
-- ARGV    triples: delay ms, id, value; then, optionally, the call's token (with KEYS[5])
-- Returns the due time (server ms) of each entry, in order. Publishes the new earliest
-- due time when the batch moved it earlier, so that every scheduler (Redisson's too) wakes.
--
-- Safe to run twice (a cluster client resends a request after an I/O error): an entry
-- already in the set is not added to the list again, and with a token the second run
-- only returns the due times of the first (the token key lives 60 s).
local err = wrong_type(KEYS[1], 'zset', KEYS[2], 'list', KEYS[4], 'list')
if err then return err end
local token = ''
local last = #ARGV
if #ARGV % 3 == 1 then
  token = ARGV[#ARGV]
  last = #ARGV - 1
end
if token ~= '' then
  local done = redis.call('GET', KEYS[5])
  if done then
    local due = {}
    for at in string.gmatch(done, '%d+') do due[#due + 1] = tonumber(at) end
    return due
  end
end
local now = now_ms()
local before = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local due = {}
local packed = {}
for i = 1, last, 3 do
  local at = now + tonumber(ARGV[i])
  local entry = struct.pack('Bc0Lc0', #ARGV[i + 1], ARGV[i + 1], #ARGV[i + 2], ARGV[i + 2])
  if redis.call('ZADD', KEYS[1], 'NX', at, entry) == 1 then
    packed[#packed + 1] = entry
  else
    at = tonumber(redis.call('ZSCORE', KEYS[1], entry))
  end
  due[#due + 1] = at
end
call_chunked('RPUSH', KEYS[2], packed)
local after = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if after[1] and (before[1] == nil or tonumber(after[2]) < tonumber(before[2])) then
  redis.call('PUBLISH', KEYS[3], ms_string(tonumber(after[2])))
end
if token ~= '' then
  local text = {}
  for i, at in ipairs(due) do text[i] = ms_string(at) end
  redis.call('SET', KEYS[5], table.concat(text, ','), 'PX', 60000)
end
return due
