-- Move a reliable queue forward: cascade the wheel's opened buckets toward 'near', make due
-- messages ready, and take back deliveries whose visibility timeout passed (redelivered
-- with one more attempt, or buried in the dead letters after the last one).
-- KEYS, ARGV[1], ARGV[2]: see reliable_lib.lua.
-- ARGV[3] batch size, ARGV[4] visibility timeout ms, ARGV[5] max attempts
-- Returns {work done, next wake time in server ms or -1, server now in ms}.
local err = wrong_type(WHEEL, 'zset', NEAR, 'zset', READY, 'stream', IDS, 'hash', DEAD, 'hash', META, 'hash')
if err then return err end
local batch = tonumber(ARGV[3])
local visibility = tonumber(ARGV[4])
local max_attempts = tonumber(ARGV[5])
local now = now_ms()
local done = 0

-- 1. Buckets that have opened (a bucket opens `lead` ms before it starts): their entries
-- cascade to the finer level they now belong in, or from level 0 to 'near' by due time
-- (see reliable_lib.lua). At most `batch` entries per call, the finest level first (its
-- entries come due soonest); a bucket left unfinished stays in its wheel and the next call
-- goes on with it. Entries going to one bucket are written with one RPUSH.
local budget = batch
local pushes = {}
for level = 0, TOP do
  if budget <= 0 then break end
  local width, lead = LEVELS[level + 1][1], LEVELS[level + 1][2]
  local wheel = wheel_key(level)
  local long = is_long(level)
  for _, b in ipairs(redis.call('ZRANGEBYSCORE', wheel, '-inf', now + lead, 'LIMIT', 0, 8)) do
    if budget <= 0 then break end
    local bucket = tonumber(b, 16)
    local start = bucket * width
    local key = bucket_key(level, bucket)
    local entries = redis.call('LRANGE', key, 0, budget - 1)
    for _, entry in ipairs(entries) do
      local attempts, flags, offset, stored, payload = unpack_entry(entry, long)
      if attempts and offset < width then
        cascade_entry(stored, flags, attempts, start + offset, payload, now, pushes)
      else
        redis.call('RPUSH', PREFIX .. 'corrupt', entry)
        redis.call('HINCRBY', META, 'delayed', -1)
      end
    end
    budget = budget - #entries
    done = done + #entries
    redis.call('LTRIM', key, #entries, -1)
    if redis.call('EXISTS', key) == 0 then redis.call('ZREM', wheel, b) end
  end
end
push_all(pushes)

-- 2. Due messages in 'near' become ready, in due order (one ZREM and one HINCRBY for all).
local due = redis.call('ZRANGEBYSCORE', NEAR, '-inf', now, 'WITHSCORES', 'LIMIT', 0, batch)
local taken = {}
for i = 1, #due, 2 do
  local attempts, flags, offset, id, payload = unpack_entry(due[i])
  if attempts then
    make_ready(id, flags, attempts, tonumber(due[i + 1]), payload)
  else
    redis.call('RPUSH', PREFIX .. 'corrupt', due[i])
  end
  taken[#taken + 1] = due[i]
end
if #taken > 0 then
  call_chunked('ZREM', NEAR, taken)
  redis.call('HINCRBY', META, 'delayed', -#taken)
end
done = done + #taken

-- 3. Deliveries past their visibility timeout come back. The pending list is in delivery
-- order (a redelivery is a new stream entry), so when its oldest entry has not expired,
-- none has, and the scan is skipped.
local wake = next_wake()
if redis.call('EXISTS', READY) == 1 then
  local oldest = redis.call('XPENDING', READY, GROUP, '-', '+', 1)
  if oldest[1] and tonumber(oldest[1][3]) >= visibility then
    local claimed = redis.call('XAUTOCLAIM', READY, GROUP, 'delayq-reaper', visibility, '0-0', 'COUNT', math.min(batch, 100))
    for _, row in ipairs(claimed[2]) do
      local sid, kv = row[1], row[2]
      redis.call('XACK', READY, GROUP, sid)
      redis.call('XDEL', READY, sid)
      if kv then
        local f = {}
        for i = 1, #kv, 2 do f[kv[i]] = kv[i + 1] end
        local attempts = tonumber(f['a']) + 1
        if attempts >= max_attempts then
          bury(f['i'], tonumber(f['f']), attempts, f['p'], now)
        else
          make_ready(f['i'], tonumber(f['f']), attempts, tonumber(f['d']), f['p'])
        end
        done = done + 1
      end
    end
    oldest = redis.call('XPENDING', READY, GROUP, '-', '+', 1)
  end
  -- Wake again when the oldest delivery still pending would expire.
  if oldest[1] then
    local expires = now + math.max(visibility - tonumber(oldest[1][3]), 0)
    if wake < 0 or expires < wake then wake = expires end
  end
end
return {done, wake, now}
