-- Helpers of the reliable queue, prepended (after lib.lua) to each reliable_*.lua script.
--
-- Every reliable script gets the same fixed keys:
--   KEYS[1] wheel  (zset: level-0 bucket number -> bucket start ms)
--   KEYS[2] near   (zset: packed entry -> due ms, the entries due within a level-0 width)
--   KEYS[3] ready  (stream with consumer group 'delayq': ready and in-flight messages)
--   KEYS[4] ids    (hash: id -> location: 'b<bucket hex>' (level 0), 'b<level>:<bucket hex>'
--                  or 'n<due ms>' for a delayed message whose place cannot be read from its
--                  id, 'r<stream entry id>' for every ready or in-flight message)
--   KEYS[5] dead   (hash: id -> packed dead letter)
--   KEYS[6] meta   (hash: counters)
-- and ARGV[1] = the key prefix '{dq:N}:' (bucket lists and the wheels of the coarser levels
-- are computed from it, all in the queue's hash slot), ARGV[2] = the levels of the timing
-- wheel, finest first, as 'width:lead,width:lead,...' in ms (a plain number is one level of
-- that width, the layout before the wheel had levels). Script arguments start at ARGV[3].
--
-- The wheel (docs/reliable-queue.md): level l has buckets of LEVELS[l + 1] = {width, lead};
-- bucket b of level l holds the messages due in [b * width, (b + 1) * width) and opens
-- `lead` ms before it starts. A message lives in the coarsest level whose bucket for its due
-- time has not opened (level_for); when a bucket opens, the transfer script cascades its
-- entries to finer levels (from level 0: to 'near'), a batch per call. Level 0's list is
-- '{dq:N}:b:<hex>' in the wheel KEYS[1]; level l > 0 has '{dq:N}:b<l>:<hex>' in the sorted
-- set '{dq:N}:wheel<l>', members the bucket numbers in hex, scored by bucket start (ms).
--
-- An entry in a bucket list or in 'near' is
--   struct.pack('BBHHc0', attempts, flags, offset, #id, id) .. payload
-- in 'near' and in levels up to 65.536 s wide, and 'BBI4Hc0' (a 4-byte offset) in coarser
-- ones (the id length takes two bytes: a caller's id may be 256 bytes long).
-- attempts: deliveries so far; flags: 1 = indexed in 'ids'; offset: due ms minus bucket start
-- (0 in 'near', whose score holds the due time). A generated id is '<hex>-<16 hex>', hex the
-- level-0 bucket of its due time (due ms / level-0 width); in a bucket list only its 16
-- random hex digits are stored, the rest follows from the bucket start plus the offset.

local WHEEL, NEAR, READY, IDS, DEAD, META = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local PREFIX = ARGV[1]
local LEVELS
if ARGV[2] == '1000:1000,60000:10000,3600000:600000,86400000:36000000' then
  -- core's default (WHEEL_LEVELS), without the cost of parsing it on every call
  LEVELS = {{1000, 1000}, {60000, 10000}, {3600000, 600000}, {86400000, 36000000}}
else
  LEVELS = {}
  for w, a in string.gmatch(ARGV[2], '(%d+):(%d+)') do
    LEVELS[#LEVELS + 1] = {tonumber(w), tonumber(a)}
  end
  if #LEVELS == 0 then LEVELS[1] = {tonumber(ARGV[2]), tonumber(ARGV[2])} end
end
local TOP = #LEVELS - 1
local WIDTH = LEVELS[1][1]
local GROUP = 'delayq'
local INDEXED = 1
-- Keys every script may compute (same hash tag as the declared ones).
local SETTINGS = PREFIX .. 'settings'   -- hash: the queue's settings (reliable_settings.lua)
local LEASES = PREFIX .. 'leases'       -- zset: stream entry id of a delivery -> lease end ms
local ACKED = PREFIX .. 'acked'         -- zset: acked id kept for de-duplication -> forget ms
local DEAD_UNTIL = PREFIX .. 'dead_until' -- zset: dead letter -> when the retention ends
-- hash: dead letter -> time of death (ms) of the dead letter of its id before it (bury)
local DEAD_EARLIER = PREFIX .. 'dead_earlier'

-- The queue's settings, stored with it. Defaults mirror ReliableSettings::default() in
-- core/src/reliable_queue/settings.rs (a test checks that they agree); they apply only
-- when the settings hash is gone (deleted, or lost with a server without persistence).
local DEFAULT_SETTINGS = {
  visibility_ms = 30000,
  max_attempts = 5,
  backoff = 'exponential 1000 600000',
  shards = 1,
  dead_letter_retention_ms = 0,
  idempotency_retention_ms = 0,
}

local settings_cache = nil
local function settings()
  if settings_cache then return settings_cache end
  local s = {}
  for k, v in pairs(DEFAULT_SETTINGS) do s[k] = v end
  if redis.call('TYPE', SETTINGS)['ok'] == 'hash' then
    local kv = redis.call('HGETALL', SETTINGS)
    for i = 1, #kv, 2 do
      local n = tonumber(kv[i + 1])
      if n and kv[i] ~= 'backoff' then s[kv[i]] = n else s[kv[i]] = kv[i + 1] end
    end
  end
  settings_cache = s
  return s
end

-- The delay (ms) before retrying after failed attempt number `attempt` (1 for the first),
-- by the stored back-off; `jitter` in [0.5, 1] scales an exponential delay (the client
-- draws it: a script's random numbers are not random).
local function backoff_ms(attempt, jitter)
  local words = {}
  for w in string.gmatch(settings().backoff, '%S+') do words[#words + 1] = w end
  if words[1] == 'schedule' then
    local i = math.min(math.max(attempt, 1), #words - 1)
    return tonumber(words[i + 1])
  end
  local base, max = tonumber(words[2]) or 1000, tonumber(words[3]) or 600000
  local full = math.min(base * 2 ^ math.min(math.max(attempt - 1, 0), 40), max)
  return math.floor(full * jitter)
end

local function hex(n)
  return string.format('%x', n)
end

-- The list of bucket `bucket` of level `level`.
local function bucket_key(level, bucket)
  if level == 0 then return PREFIX .. 'b:' .. hex(bucket) end
  return PREFIX .. 'b' .. level .. ':' .. hex(bucket)
end

-- The sorted set of the buckets of level `level` that have a list.
local function wheel_key(level)
  if level == 0 then return WHEEL end
  return PREFIX .. 'wheel' .. level
end

-- wrong_type (lib.lua) of the keys named, then of the settings and the coarser wheels
-- (levels 1 and up), which are not in KEYS: a script that may write a bucket or a wheel
-- checks them all first, so that no WRONGTYPE comes after a write (Redis keeps a script's
-- writes made before an error), and every WRONGTYPE names its key.
local function wrong_type_with_wheels(...)
  local err = wrong_type(...) or wrong_type(SETTINGS, 'hash')
  if err then return err end
  for level = 1, TOP do
    err = wrong_type(wheel_key(level), 'zset')
    if err then return err end
  end
  return nil
end

-- A bucket's location in 'ids', and back (nil, nil for any other location).
local function bucket_location(level, bucket)
  if level == 0 then return 'b' .. hex(bucket) end
  return 'b' .. level .. ':' .. hex(bucket)
end

local function parse_location(location)
  local level, h = string.match(location, '^b(%d+):(%x+)$')
  if level then return tonumber(level), tonumber(h, 16) end
  h = string.match(location, '^b(%x+)$')
  if h then return 0, tonumber(h, 16) end
  return nil, nil
end

-- Entries of a level wider than 65.536 s carry a 4-byte offset.
local function is_long(level)
  return LEVELS[level + 1][1] > 65536
end

local function pack_entry(attempts, flags, offset, id, payload, long)
  return struct.pack(long and 'BBI4Hc0' or 'BBHHc0', attempts, flags, offset, #id, id) .. payload
end

-- Returns attempts, flags, offset, id, payload (or nil for bytes of another format).
local function unpack_entry(entry, long)
  local ok, attempts, flags, offset, id, pos = pcall(struct.unpack, long and 'BBI4Hc0' or 'BBHHc0', entry)
  if not ok then return nil end
  return attempts, flags, offset, id, string.sub(entry, pos)
end

-- The bucket a generated id was born in, or nil for any other id.
local function bucket_of_generated(id)
  local h = string.match(id, '^(%x+)%-%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x$')
  if h then return tonumber(h, 16) end
  return nil
end

-- The level a message due at `due` belongs in at `now`: the coarsest level whose bucket for
-- `due` has not opened yet (a bucket opens `lead` ms before it starts). A finer bucket opens
-- no earlier than the coarser one around it (leads grow with the level), so the levels from
-- the top are first open, then not. -1 when even level 0's bucket has opened: 'near'.
local function level_for(due, now)
  for level = TOP, 0, -1 do
    local width = LEVELS[level + 1][1]
    if math.floor(due / width) * width - LEVELS[level + 1][2] > now then return level end
  end
  return -1
end

local function ensure_group()
  if redis.call('EXISTS', READY) == 0 then
    redis.call('XGROUP', 'CREATE', READY, GROUP, '0', 'MKSTREAM')
  end
end

local function set_location(id, flags, location)
  if flags == INDEXED then redis.call('HSET', IDS, id, location) end
end

-- Makes a message ready: one stream entry, which wakes a blocked XREADGROUP at once. Every
-- ready message is indexed by id (memory per ready message, not per waiting one), so that
-- cancel and reschedule find it until a consumer receives it.
local function make_ready(id, flags, attempts, due, payload)
  ensure_group()
  local sid = redis.call('XADD', READY, '*', 'i', id, 'p', payload, 'a', attempts, 'd', ms_string(due), 'f', flags)
  redis.call('HSET', IDS, id, 'r' .. sid)
  return sid
end

local function full_id(stored, bucket)
  if #stored == 16 and bucket and not string.find(stored, '[^%x]') then
    return string.format('%x', bucket) .. '-' .. stored
  end
  return stored
end

-- Puts a delayed message where its due time says at `now`: in 'near' once its level-0
-- bucket has opened, else in its bucket of level level_for(due, now). The id is stored short
-- when it is a generated id of its own due time. Does not count the message.
-- A bucket key holding another type (an operator's mistake, a clash of names) would stop
-- the whole queue: every offer into that bucket and every cascade through it would fail
-- with WRONGTYPE. Like an undecodable entry, it is set aside instead: renamed to
-- '{dq:N}:corrupt:<its own suffix>' and logged. Returns true when it was.
local function quarantine_wrong_bucket(key)
  local t = redis.call('TYPE', key)['ok']
  if t == 'none' or t == 'list' then return false end
  local aside = PREFIX .. 'corrupt:' .. string.sub(key, #PREFIX + 1)
  redis.call('RENAME', key, aside)
  redis.log(redis.LOG_WARNING, 'delayq: ' .. key .. ' held a ' .. t .. ', not a bucket list; moved aside to ' .. aside)
  return true
end

-- Counts `n` delayed messages out (taken from the wheel, or set aside as undecodable), never
-- below 0: an entry written by hand, not by an offer, was never counted in.
local function uncount_delayed(n)
  if redis.call('HINCRBY', META, 'delayed', -n) < 0 then
    redis.call('HSET', META, 'delayed', 0)
  end
end

local function put_delayed(id, flags, attempts, due, payload, now)
  local level = level_for(due, now)
  if level < 0 then
    redis.call('ZADD', NEAR, due, pack_entry(attempts, flags, 0, id, payload))
    if flags == INDEXED then redis.call('HSET', IDS, id, 'n' .. ms_string(due)) end
    return
  end
  local width = LEVELS[level + 1][1]
  local bucket = math.floor(due / width)
  local stored = id
  if flags ~= INDEXED and bucket_of_generated(id) == math.floor(due / WIDTH) then
    stored = string.sub(id, -16)
  end
  quarantine_wrong_bucket(bucket_key(level, bucket))
  redis.call('RPUSH', bucket_key(level, bucket),
    pack_entry(attempts, flags, due - bucket * width, stored, payload, is_long(level)))
  redis.call('ZADD', wheel_key(level), 'NX', bucket * width, hex(bucket))
  if flags == INDEXED then redis.call('HSET', IDS, id, bucket_location(level, bucket)) end
end

-- The cascade of one entry read from an opened bucket, `stored` its id as stored there
-- (kept as it is: the due second a short id needs does not change): to 'near' (with its
-- full id; also when it is already due, so that the transfer makes 'near' ready in due
-- order), or to a bucket of a finer level. Collected in `pushes` for push_all, which writes
-- 'near' with one ZADD and each bucket with one RPUSH.
local function cascade_entry(stored, flags, attempts, due, payload, now, pushes)
  local level = level_for(due, now)
  if level < 0 then
    local id = stored
    if flags ~= INDEXED then id = full_id(stored, math.floor(due / WIDTH)) end
    local near = pushes.near
    if not near then
      near = {}
      pushes.near = near
    end
    near[#near + 1] = due
    near[#near + 1] = pack_entry(attempts, flags, 0, id, payload)
    if flags == INDEXED then redis.call('HSET', IDS, id, 'n' .. ms_string(due)) end
    return
  end
  local width = LEVELS[level + 1][1]
  local bucket = math.floor(due / width)
  local buckets = pushes[level + 1]
  if not buckets then
    buckets = {}
    pushes[level + 1] = buckets
  end
  local list = buckets[bucket]
  if not list then
    list = {}
    buckets[bucket] = list
  end
  list[#list + 1] = pack_entry(attempts, flags, due - bucket * width, stored, payload, is_long(level))
  if flags == INDEXED then redis.call('HSET', IDS, stored, bucket_location(level, bucket)) end
end

-- Writes the entries cascade_entry collected.
local function push_all(pushes)
  if pushes.near then call_chunked('ZADD', NEAR, pushes.near) end
  for l = 1, TOP + 1 do
    for bucket, list in pairs(pushes[l] or {}) do
      quarantine_wrong_bucket(bucket_key(l - 1, bucket))
      call_chunked('RPUSH', bucket_key(l - 1, bucket), list)
      redis.call('ZADD', wheel_key(l - 1), 'NX', bucket * LEVELS[l][1], hex(bucket))
    end
  end
end

-- Places a message by due time: ready now, else delayed (put_delayed) and counted.
local function place(id, flags, attempts, due, payload, now)
  if due <= now then
    make_ready(id, flags, attempts, due, payload)
    return
  end
  put_delayed(id, flags, attempts, due, payload, now)
  redis.call('HINCRBY', META, 'delayed', 1)
end

-- Unpacks an entry of a bucket of level `level` that starts at `start`. Returns attempts,
-- flags, due, full id, payload; nil for bytes of another format (or an offset outside the
-- bucket).
local function read_entry(level, start, entry)
  local attempts, flags, offset, stored, payload = unpack_entry(entry, is_long(level))
  if not attempts or offset >= LEVELS[level + 1][1] then return nil end
  local due = start + offset
  local id = stored
  if flags ~= INDEXED then id = full_id(stored, math.floor(due / WIDTH)) end
  return attempts, flags, due, id, payload
end

-- Finds message `id` in bucket `bucket` of level `level` and removes it (unless `keep`): a
-- scan of the list, a page at a time, unpacking only the entries that contain the id's last
-- 16 bytes. Returns attempts, flags, due, payload, or nil.
local function take_from_bucket(level, bucket, id, keep)
  local key = bucket_key(level, bucket)
  -- No list there (or a key of another type, which the transfer sets aside once its wheel
  -- names it): no message either, and no error for a look that finds nothing.
  if redis.call('TYPE', key)['ok'] ~= 'list' then return nil end
  local start = bucket * LEVELS[level + 1][1]
  local needle = string.sub(id, -16)
  local from = 0
  while true do
    local page = redis.call('LRANGE', key, from, from + 999)
    for _, entry in ipairs(page) do
      if string.find(entry, needle, 1, true) then
        local attempts, flags, due, full, payload = read_entry(level, start, entry)
        if attempts and full == id then
          if keep then return attempts, flags, due, payload end
          redis.call('LREM', key, 1, entry)
          if redis.call('EXISTS', key) == 0 then
            redis.call('ZREM', wheel_key(level), hex(bucket))
          end
          uncount_delayed(1)
          return attempts, flags, due, payload
        end
      end
    end
    if #page < 1000 then return nil end
    from = from + 1000
  end
end

-- Finds message `id` in 'near' among the entries due from `lo` to `hi` (all of them when
-- nil) and removes it (unless `keep`). Returns attempts, flags, due, payload, or nil.
local function take_from_near(id, lo, hi, keep)
  local rows
  if lo then
    rows = redis.call('ZRANGEBYSCORE', NEAR, lo, hi, 'WITHSCORES')
  else
    rows = redis.call('ZRANGE', NEAR, 0, -1, 'WITHSCORES')
  end
  for i = 1, #rows, 2 do
    local attempts, flags, offset, stored, payload = unpack_entry(rows[i])
    if attempts and stored == id then
      if keep then return attempts, flags, tonumber(rows[i + 1]), payload end
      redis.call('ZREM', NEAR, rows[i])
      uncount_delayed(1)
      return attempts, flags, tonumber(rows[i + 1]), payload
    end
  end
  return nil
end

-- Finds a delayed message by id and removes it (unless `keep`: then it only looks). Returns
-- attempts, flags, due, payload, or nil when the message is not delayed (unknown, ready, in
-- flight, or dead).
-- A caller's id (or a moved message) has its place in 'ids'. A generated id names its due
-- second, so it is in 'near' around that second or in one bucket per level: at most one
-- look per place (a bucket that does not exist costs one TYPE).
local function take_delayed(id, keep)
  local location = redis.call('HGET', IDS, id)
  if location then
    local level, bucket = parse_location(location)
    if level then return take_from_bucket(level, bucket, id, keep) end
    if string.sub(location, 1, 1) == 'n' then
      -- 'n' alone: written before 'near' locations carried the due time.
      local due = tonumber(string.sub(location, 2))
      return take_from_near(id, due, due, keep)
    end
    return nil
  end
  -- Every place, finest first, not only the one the clock names now: a server clock
  -- stepped back (an NTP step, a failover to a host whose clock is behind) leaves messages
  -- in finer places than now's; a cascade that lags, in coarser ones.
  local born = bucket_of_generated(id)
  if not born then return nil end
  local due = born * WIDTH
  local attempts, flags, at, payload = take_from_near(id, due, due + WIDTH - 1, keep)
  if attempts then return attempts, flags, at, payload end
  for l = 0, TOP do
    local width = LEVELS[l + 1][1]
    attempts, flags, at, payload = take_from_bucket(l, math.floor(due / width), id, keep)
    if attempts then return attempts, flags, at, payload end
  end
  return nil
end

-- The fields (i, p, a, d, f) of stream entry `sid`, or nil when it is gone.
local function stream_fields(sid)
  local rows = redis.call('XRANGE', READY, sid, sid)
  if #rows == 0 then return nil end
  local fields = {}
  local kv = rows[1][2]
  for i = 1, #kv, 2 do fields[kv[i]] = kv[i + 1] end
  return fields
end

local function is_pending(sid)
  return #redis.call('XPENDING', READY, GROUP, sid, sid, 1) > 0
end

-- Ends a delivery: removes stream entry `sid` if it is still pending. Returns its fields
-- as a table (i, p, a, d, f), or nil when the delivery is no longer pending (acked, or
-- taken back after its visibility timeout).
local function finish_delivery(sid)
  if redis.call('EXISTS', READY) == 0 then return nil end
  if not is_pending(sid) then return nil end
  local fields = stream_fields(sid)
  redis.call('XACK', READY, GROUP, sid)
  redis.call('XDEL', READY, sid)
  redis.call('ZREM', LEASES, sid)
  return fields
end

-- Finds a ready message that no consumer has received yet by id and removes it from the
-- stream. Returns its fields (i, p, a, d, f), or nil when the message is not ready
-- (unknown, delayed, in flight or dead).
local function take_ready(id)
  local location = redis.call('HGET', IDS, id)
  if not location or #location < 2 or string.sub(location, 1, 1) ~= 'r' then return nil end
  if redis.call('EXISTS', READY) == 0 then return nil end
  local sid = string.sub(location, 2)
  if is_pending(sid) then return nil end
  local fields = stream_fields(sid)
  if not fields then return nil end
  redis.call('XDEL', READY, sid)
  return fields
end

-- Buries a message in the dead letters under its id. An earlier dead letter of the same id
-- is kept, renamed '<id>\xff<its time of death in ms>', so a second death loses nothing.
local function bury(id, flags, attempts, payload, now)
  local retention = settings().dead_letter_retention_ms
  local earlier = redis.call('HGET', DEAD, id)
  if earlier then
    local _, _, died_at = struct.unpack('BBd', earlier)
    -- Byte 0xFF never occurs in UTF-8, so no id can look like a renamed one.
    local renamed = id .. '\255' .. ms_string(died_at)
    redis.call('HSET', DEAD, renamed, earlier)
    if retention > 0 then redis.call('ZADD', DEAD_UNTIL, died_at + retention, renamed) end
    -- The chain of earlier letters, latest first, so that each can be requeued in turn.
    local before = redis.call('HGET', DEAD_EARLIER, id)
    if before then redis.call('HSET', DEAD_EARLIER, renamed, before) end
    redis.call('HSET', DEAD_EARLIER, id, ms_string(died_at))
  else
    redis.call('HDEL', DEAD_EARLIER, id)
  end
  redis.call('HSET', DEAD, id, struct.pack('BBd', attempts, flags, now) .. payload)
  redis.call('HDEL', IDS, id)
  if retention > 0 then redis.call('ZADD', DEAD_UNTIL, now + retention, id) end
end

-- After the dead letter `id` was requeued, the latest earlier dead letter of its id (if its
-- retention kept it) takes its place, to be listed and requeued under the id in turn.
local function promote_earlier(id)
  local died = redis.call('HGET', DEAD_EARLIER, id)
  if not died then return end
  redis.call('HDEL', DEAD_EARLIER, id)
  local renamed = id .. '\255' .. died
  local packed = redis.call('HGET', DEAD, renamed)
  if not packed then return end
  local before = redis.call('HGET', DEAD_EARLIER, renamed)
  redis.call('HDEL', DEAD, renamed)
  redis.call('HSET', DEAD, id, packed)
  if before then
    redis.call('HDEL', DEAD_EARLIER, renamed)
    redis.call('HSET', DEAD_EARLIER, id, before)
  end
  local until_ms = redis.call('ZSCORE', DEAD_UNTIL, renamed)
  if until_ms then
    redis.call('ZREM', DEAD_UNTIL, renamed)
    redis.call('ZADD', DEAD_UNTIL, until_ms, id)
  end
end

-- Forgets a finished id, or keeps it for the idempotency retention so that an offer of it
-- is still de-duplicated ('a' in ids: acked).
local function forget_ids(ids, now)
  local retention = settings().idempotency_retention_ms
  if retention > 0 then
    local marks, until_ = {}, {}
    for _, id in ipairs(ids) do
      marks[#marks + 1] = id
      marks[#marks + 1] = 'a'
      until_[#until_ + 1] = now + retention
      until_[#until_ + 1] = id
    end
    call_chunked('HSET', IDS, marks)
    call_chunked('ZADD', ACKED, until_)
  else
    call_chunked('HDEL', IDS, ids)
  end
end

-- Forgets what the retention settings keep no longer, at most `batch` of each: acked ids
-- kept for de-duplication, and dead letters whose time is up. The transfer task does it on
-- every pass; the calls that read them do it first, so that a retention ends on time
-- whether a transfer task runs or not.
local function expire_retained(now, batch)
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', ACKED, '-inf', now, 'LIMIT', 0, batch)) do
    if redis.call('HGET', IDS, id) == 'a' then redis.call('HDEL', IDS, id) end
    redis.call('ZREM', ACKED, id)
  end
  for _, field in ipairs(redis.call('ZRANGEBYSCORE', DEAD_UNTIL, '-inf', now, 'LIMIT', 0, batch)) do
    redis.call('HDEL', DEAD, field)
    redis.call('HDEL', DEAD_EARLIER, field)
    redis.call('ZREM', DEAD_UNTIL, field)
  end
end

-- Whether the acked id `id` is still kept for de-duplication at `now`; one whose time is up
-- is forgotten here.
local function acked_and_kept(id, now)
  local until_ms = tonumber(redis.call('ZSCORE', ACKED, id))
  if until_ms and until_ms <= now then
    redis.call('HDEL', IDS, id)
    redis.call('ZREM', ACKED, id)
    return false
  end
  return true
end

-- The next time the transfer task has work: the first due time in 'near', or the time the
-- first bucket of any level opens (its entries then cascade, or go to 'near'). -1 when
-- nothing is delayed.
local function next_wake()
  local best = -1
  local n = redis.call('ZRANGE', NEAR, 0, 0, 'WITHSCORES')
  if n[1] then best = tonumber(n[2]) end
  for level = 0, TOP do
    local w = redis.call('ZRANGE', wheel_key(level), 0, 0, 'WITHSCORES')
    if w[1] then
      local opens = tonumber(w[2]) - LEVELS[level + 1][2]
      if best < 0 or opens < best then best = opens end
    end
  end
  return best
end

-- The time the transfer task has work for a message due at `due` (> now) placed at `now`:
-- its due time in 'near', else the time its bucket opens.
local function wake_for(due, now)
  local level = level_for(due, now)
  if level < 0 then return due end
  local width = LEVELS[level + 1][1]
  return math.floor(due / width) * width - LEVELS[level + 1][2]
end

-- Whether the transfer task already has work at or before `t` (next_wake() <= t, asked with
-- as few commands as the answer needs).
local function wakes_by(t)
  if #redis.call('ZRANGEBYSCORE', NEAR, '-inf', t, 'LIMIT', 0, 1) > 0 then return true end
  for level = 0, TOP do
    local l = LEVELS[level + 1]
    if #redis.call('ZRANGEBYSCORE', wheel_key(level), '-inf', t + l[2], 'LIMIT', 0, 1) > 0 then
      return true
    end
  end
  return false
end
