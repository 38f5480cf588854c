-- Dead letters: list, requeue or purge.
-- KEYS, ARGV[1], ARGV[2]: see reliable_lib.lua.
-- ARGV[3] 'list' | 'requeue' | 'purge'; for 'list' ARGV[4] limit; for 'requeue' ARGV[4..]
-- ids, or none for up to 1000 of them.
-- Returns for 'list' {{id, attempts, died at ms, payload}, ...}; else the count affected.
-- An id that died more than once has one dead letter per death ('<id>\xff<ms>' for the
-- earlier ones); requeue takes the latest, and never an id that is alive again (waiting,
-- ready or in flight: requeueing it would make two messages of one id). Once the latest is
-- requeued, the one before takes its place, to be requeued when the id is not alive.
local err = wrong_type_with_wheels(WHEEL, 'zset', NEAR, 'zset', READY, 'stream', IDS, 'hash', DEAD, 'hash',
  META, 'hash', DEAD_UNTIL, 'zset', DEAD_EARLIER, 'hash', ACKED, 'zset')
if err then return err end
local op = ARGV[3]
-- Dead letters past their retention are gone, whether a transfer task runs or not.
local now = now_ms()
expire_retained(now, 1000)
local function each_dead(limit, fn)
  local cursor = '0'
  local n = 0
  repeat
    local page = redis.call('HSCAN', DEAD, cursor, 'COUNT', 100)
    cursor = page[1]
    for i = 1, #page[2], 2 do
      if n >= limit then return end
      fn(page[2][i], page[2][i + 1])
      n = n + 1
    end
  until cursor == '0'
end
local function unpack_dead(packed)
  local attempts, flags, died, pos = struct.unpack('BBd', packed)
  return attempts, flags, died, string.sub(packed, pos)
end
if op == 'list' then
  local out = {}
  each_dead(tonumber(ARGV[4]), function(id, packed)
    local attempts, flags, died, payload = unpack_dead(packed)
    local real = string.match(id, '^(.*)\255%d+$') or id
    out[#out + 1] = {real, attempts, ms_string(died), payload}
  end)
  return out
elseif op == 'requeue' then
  local ids = {}
  if #ARGV >= 4 then
    for i = 4, #ARGV do ids[#ids + 1] = ARGV[i] end
  else
    each_dead(1000, function(id)
      if not string.find(id, '\255') then ids[#ids + 1] = id end
    end)
  end
  local n = 0
  for _, id in ipairs(ids) do
    local packed = redis.call('HGET', DEAD, id)
    local alive = redis.call('HGET', IDS, id)
    if packed and alive and alive ~= 'a' then
      redis.log(redis.LOG_NOTICE, 'delayq: dead letter ' .. id .. ' not requeued: a live message has its id')
    elseif packed then
      local attempts, flags, died, payload = unpack_dead(packed)
      redis.call('HDEL', DEAD, id)
      redis.call('ZREM', DEAD_UNTIL, id)
      make_ready(id, flags, 0, now, payload)
      promote_earlier(id)
      n = n + 1
    end
  end
  return n
elseif op == 'purge' then
  local n = redis.call('HLEN', DEAD)
  redis.call('DEL', DEAD, DEAD_UNTIL, DEAD_EARLIER)
  return n
end
return redis.error_reply('ERR unknown dead-letter operation')
