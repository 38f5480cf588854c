-- Move due entries of a delayed queue to its destination, one batch per call.
-- KEYS[1] destination list, KEYS[2] timeout set, KEYS[3] queue list, KEYS[4] corrupt list
-- ARGV[1] batch size
-- Returns {moved, next due time in server ms or -1, server now in ms}. Entries that
-- cannot be unpacked go to the corrupt list so they never block those behind them.
local err = wrong_type(KEYS[1], 'list', KEYS[2], 'zset', KEYS[3], 'list', KEYS[4], 'list')
if err then return err end
local now = now_ms()
local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
if #due > 0 then
  local values = {}
  local is_due = {}
  for _, entry in ipairs(due) do
    is_due[entry] = true
    local value = unpack_value(entry)
    if value then
      values[#values + 1] = value
    else
      redis.call('RPUSH', KEYS[4], entry)
      redis.log(redis.LOG_WARNING, 'delayq: moved an undecodable entry of ' .. KEYS[2] .. ' to ' .. KEYS[4])
    end
  end
  -- Entries usually come due in offer order, so they sit at the head of the list: trim
  -- that run at once, and LREM (a scan) only the entries found elsewhere.
  local head = redis.call('LRANGE', KEYS[3], 0, #due - 1)
  local run = 0
  while run < #head and is_due[head[run + 1]] do
    is_due[head[run + 1]] = nil
    run = run + 1
  end
  if run > 0 then redis.call('LTRIM', KEYS[3], run, -1) end
  for entry, _ in pairs(is_due) do
    redis.call('LREM', KEYS[3], 1, entry)
  end
  call_chunked('RPUSH', KEYS[1], values)
  call_chunked('ZREM', KEYS[2], due)
end
local nxt = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
local next_due = -1
if nxt[1] then next_due = tonumber(nxt[2]) end
return {#due, next_due, now}
