-- Move a reliable queue forward: cascade the wheel's opened buckets toward 'near', make due
-- messages ready, and take back deliveries whose visibility timeout passed (redelivered
-- with one more attempt, or buried in the dead letters after the last one).
-- KEYS, ARGV[1], ARGV[2]: see reliable_lib.lua.
-- ARGV[3] batch size. The visibility timeout and max attempts are the queue's stored
-- settings (reliable_settings.lua), whichever process runs the pass.
-- Returns {work done, next wake time in server ms or -1, server now in ms, deliveries buried
-- because their lease ended on the last attempt}.
local err = wrong_type_with_wheels(WHEEL, 'zset', NEAR, 'zset', READY, 'stream', IDS, 'hash', DEAD, 'hash',
  META, 'hash', LEASES, 'zset', ACKED, 'zset', DEAD_UNTIL, 'zset', DEAD_EARLIER, 'hash',
  PREFIX .. 'corrupt', 'list')
if err then return err end
local batch = tonumber(ARGV[3])
local visibility = settings().visibility_ms
local max_attempts = settings().max_attempts
local now = now_ms()
local done = 0
local buried = 0
local set_aside = 0 -- undecodable entries moved to the corrupt list

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
    quarantine_wrong_bucket(key)
    local entries = redis.call('LRANGE', key, 0, budget - 1)
    for _, entry in ipairs(entries) do
      local attempts, flags, offset, stored, payload = unpack_entry(entry, long)
      if attempts and offset < width then
        cascade_entry(stored, flags, attempts, start + offset, payload, now, pushes)
      else
        redis.call('RPUSH', PREFIX .. 'corrupt', entry)
        uncount_delayed(1)
        set_aside = set_aside + 1
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
    set_aside = set_aside + 1
  end
  taken[#taken + 1] = due[i]
end
if #taken > 0 then
  call_chunked('ZREM', NEAR, taken)
  uncount_delayed(#taken)
end
done = done + #taken

-- 3. Deliveries whose lease ended come back. A lease starts when XREADGROUP delivers the
-- entry and ends once the delivery has been idle in the pending list for the visibility
-- timeout, unless `extend` recorded another end in LEASES, which then decides.
local function take_back(sid)
  local claimed = redis.call('XCLAIM', READY, GROUP, 'delayq-reaper', 0, sid)
  redis.call('XACK', READY, GROUP, sid)
  redis.call('XDEL', READY, sid)
  redis.call('ZREM', LEASES, sid)
  local kv = claimed[1] and claimed[1][2]
  if kv then
    local f = {}
    for i = 1, #kv, 2 do f[kv[i]] = kv[i + 1] end
    local attempts = tonumber(f['a']) + 1
    if attempts >= max_attempts then
      bury(f['i'], tonumber(f['f']), attempts, f['p'], now)
      buried = buried + 1
    else
      make_ready(f['i'], tonumber(f['f']), attempts, tonumber(f['d']), f['p'])
    end
  end
  done = done + 1
end
local wake = next_wake()
if redis.call('EXISTS', READY) == 1 then
  local budget = batch
  for _, sid in ipairs(redis.call('ZRANGEBYSCORE', LEASES, '-inf', now, 'LIMIT', 0, batch)) do
    if is_pending(sid) then
      take_back(sid)
      budget = budget - 1
    else
      redis.call('ZREM', LEASES, sid)
    end
  end
  -- Idle past the visibility timeout, without a recorded end: up to 10 pages of the
  -- group's pending list a pass, going on where the last pass stopped (META 'reap_from',
  -- around to the start after the end), so that deliveries whose lease was extended for
  -- longer than the visibility timeout, however many, never hide the ones behind them for
  -- good. Each such delivery met here starts its idle time again (as `extend` does), so
  -- that it fills a page at most once a visibility timeout.
  local page = math.max(math.min(batch, 100), 1)
  local stored = redis.call('HGET', META, 'reap_from') or '-'
  local from = stored
  local wrapped = from == '-'
  for _ = 1, 10 do
    if budget <= 0 then break end
    local rows = redis.call('XPENDING', READY, GROUP, 'IDLE', visibility, from, '+', page)
    for _, row in ipairs(rows) do
      if budget <= 0 then break end
      if redis.call('ZSCORE', LEASES, row[1]) then
        redis.call('XCLAIM', READY, GROUP, row[2], 0, row[1], 'JUSTID')
      else
        take_back(row[1])
        budget = budget - 1
      end
      from = '(' .. row[1]
    end
    if budget > 0 and #rows < page then
      -- The end: once around from the start, then stop.
      if wrapped then from = '-' break end
      from, wrapped = '-', true
    end
  end
  if from ~= stored then
    if from == '-' then
      redis.call('HDEL', META, 'reap_from')
    else
      redis.call('HSET', META, 'reap_from', from)
    end
  end
  -- Wake again when the next lease ends: the first recorded end, or the oldest delivery
  -- without one (XREADGROUP delivers in entry id order, so the lowest id was delivered
  -- first). When the 16 oldest all have a recorded end, the reconcile interval covers the
  -- rest.
  local first = redis.call('ZRANGE', LEASES, 0, 0, 'WITHSCORES')
  if first[1] then
    local ends = tonumber(first[2])
    if wake < 0 or ends < wake then wake = ends end
  end
  for _, row in ipairs(redis.call('XPENDING', READY, GROUP, '-', '+', 16)) do
    if not redis.call('ZSCORE', LEASES, row[1]) then
      local expires = now + math.max(visibility - tonumber(row[3]), 0)
      if wake < 0 or expires < wake then wake = expires end
      break
    end
  end
end

-- 4. Retention: acked ids kept for de-duplication, and dead letters, whose time is up.
expire_retained(now, batch)
return {done, wake, now, buried, set_aside}
