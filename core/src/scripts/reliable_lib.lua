-- Helpers of the reliable queue, prepended (after lib.lua) to each reliable_*.lua script.
--
-- Every reliable script gets the same fixed keys:
--   KEYS[1] wheel  (zset: bucket number -> bucket start ms)
--   KEYS[2] near   (zset: packed entry -> due ms, the entries due within a bucket width)
--   KEYS[3] ready  (stream with consumer group 'delayq': ready and in-flight messages)
--   KEYS[4] ids    (hash: id -> location: 'b<bucket hex>' or 'n' for a delayed message whose
--                  bucket cannot be read from its id, 'r<stream entry id>' for every ready or
--                  in-flight message)
--   KEYS[5] dead   (hash: id -> packed dead letter)
--   KEYS[6] meta   (hash: counters)
-- and ARGV[1] = the key prefix '{dq:N}:' (bucket lists are '{dq:N}:b:<bucket hex>', all in
-- the queue's hash slot), ARGV[2] = bucket width in ms. Script arguments start at ARGV[3].
--
-- An entry in a bucket list or in 'near' is
--   struct.pack('BBHHc0', attempts, flags, offset, #id, id) .. payload
-- (the id length takes two bytes: a caller's id may be 256 bytes long)
-- attempts: deliveries so far; flags: 1 = indexed in 'ids'; offset: due ms minus bucket start
-- (0 in 'near', whose score holds the due time). A generated id is '<bucket hex>-<16 hex>';
-- in a bucket list of its own bucket only the 16 random hex digits are stored.

local WHEEL, NEAR, READY, IDS, DEAD, META = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local PREFIX = ARGV[1]
local WIDTH = tonumber(ARGV[2])
local GROUP = 'delayq'
local INDEXED = 1
-- Keys every script may compute (same hash tag as the declared ones).
local SETTINGS = PREFIX .. 'settings'   -- hash: the queue's settings (reliable_settings.lua)
local LEASES = PREFIX .. 'leases'       -- zset: stream entry id of a delivery -> lease end ms
local ACKED = PREFIX .. 'acked'         -- zset: acked id kept for de-duplication -> forget ms
local DEAD_UNTIL = PREFIX .. 'dead_until' -- zset: dead letter -> when the retention ends

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

local function bucket_key(bucket)
  return PREFIX .. 'b:' .. string.format('%x', bucket)
end

local function pack_entry(attempts, flags, offset, id, payload)
  return struct.pack('BBHHc0', attempts, flags, offset, #id, id) .. payload
end

-- Returns attempts, flags, offset, id, payload (or nil for bytes of another format).
local function unpack_entry(entry)
  local ok, attempts, flags, offset, id, pos = pcall(struct.unpack, 'BBHHc0', entry)
  if not ok then return nil end
  return attempts, flags, offset, id, string.sub(entry, pos)
end

-- The bucket a generated id was born in, or nil for any other id.
local function bucket_of_generated(id)
  local hex = string.match(id, '^(%x+)%-%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x%x$')
  if hex then return tonumber(hex, 16) end
  return nil
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

-- Places a message by due time: ready now, in 'near' within one bucket width, else in the
-- bucket list for its due time. The id is stored short when its own bucket holds it.
local function place(id, flags, attempts, due, payload, now)
  if due <= now then
    make_ready(id, flags, attempts, due, payload)
    return
  end
  local bucket = math.floor(due / WIDTH)
  local start = bucket * WIDTH
  if start <= now + WIDTH then
    redis.call('ZADD', NEAR, due, pack_entry(attempts, flags, 0, id, payload))
    set_location(id, flags, 'n')
  else
    local stored = id
    if flags ~= INDEXED and bucket_of_generated(id) == bucket then
      stored = string.sub(id, -16)
    end
    redis.call('RPUSH', bucket_key(bucket), pack_entry(attempts, flags, due - start, stored, payload))
    redis.call('ZADD', WHEEL, 'NX', start, string.format('%x', bucket))
    set_location(id, flags, 'b' .. string.format('%x', bucket))
  end
  redis.call('HINCRBY', META, 'delayed', 1)
end

local function full_id(stored, bucket)
  if #stored == 16 and bucket and not string.find(stored, '[^%x]') then
    return string.format('%x', bucket) .. '-' .. stored
  end
  return stored
end

-- Finds a delayed message by id and removes it. Returns attempts, flags, due, payload, or
-- nil when the message is not delayed (unknown, ready, in flight, or dead).
local function take_delayed(id)
  local location = redis.call('HGET', IDS, id)
  local bucket = nil
  if location and string.sub(location, 1, 1) == 'b' then
    bucket = tonumber(string.sub(location, 2), 16)
  elseif not location then
    bucket = bucket_of_generated(id)
  end
  if bucket then
    local key = bucket_key(bucket)
    for _, entry in ipairs(redis.call('LRANGE', key, 0, -1)) do
      local attempts, flags, offset, stored, payload = unpack_entry(entry)
      if attempts and (stored == id or (flags ~= INDEXED and full_id(stored, bucket) == id)) then
        redis.call('LREM', key, 1, entry)
        if redis.call('EXISTS', key) == 0 then
          redis.call('ZREM', WHEEL, string.format('%x', bucket))
        end
        redis.call('HINCRBY', META, 'delayed', -1)
        return attempts, flags, bucket * WIDTH + offset, payload
      end
    end
  end
  if location == 'n' or location == false then
    for _, entry in ipairs(redis.call('ZRANGE', NEAR, 0, -1)) do
      local attempts, flags, offset, stored, payload = unpack_entry(entry)
      if attempts and stored == id then
        local due = tonumber(redis.call('ZSCORE', NEAR, entry))
        redis.call('ZREM', NEAR, entry)
        redis.call('HINCRBY', META, 'delayed', -1)
        return attempts, flags, due, payload
      end
    end
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
  end
  redis.call('HSET', DEAD, id, struct.pack('BBd', attempts, flags, now) .. payload)
  redis.call('HDEL', IDS, id)
  if retention > 0 then redis.call('ZADD', DEAD_UNTIL, now + retention, id) end
end

-- Forgets a finished id, or keeps it for the idempotency retention so that an offer of it
-- is still de-duplicated ('a' in ids: acked).
local function forget_id(id, now)
  local retention = settings().idempotency_retention_ms
  if retention > 0 then
    redis.call('HSET', IDS, id, 'a')
    redis.call('ZADD', ACKED, now + retention, id)
  else
    redis.call('HDEL', IDS, id)
  end
end

-- The next time the transfer task has work: the first due time in 'near', or the time the
-- first bucket must be promoted to 'near'. -1 when nothing is delayed.
local function next_wake()
  local best = -1
  local n = redis.call('ZRANGE', NEAR, 0, 0, 'WITHSCORES')
  if n[1] then best = tonumber(n[2]) end
  local w = redis.call('ZRANGE', WHEEL, 0, 0, 'WITHSCORES')
  if w[1] then
    local promote = tonumber(w[2]) - WIDTH
    if best < 0 or promote < best then best = promote end
  end
  return best
end
