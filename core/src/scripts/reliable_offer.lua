-- Offer messages to a reliable queue.
-- KEYS, ARGV[1], ARGV[2]: see reliable_lib.lua. KEYS[7] wake channel.
-- ARGV[3] the number of shards the offering handle uses.
-- ARGV[4..] quadruples: delay ms, caller id ('' for a generated one), 16 random hex digits, payload
-- Returns, per message, {id, 1 if created or 0 if the id was already waiting or in flight,
-- the due time in server ms when created or -1}.
local err = wrong_type_with_wheels(WHEEL, 'zset', NEAR, 'zset', READY, 'stream', IDS, 'hash', DEAD, 'hash',
  META, 'hash', ACKED, 'zset')
if err then return err end
-- The settings seen here (the queue's, or this shard's copy) name the shards of the queue
-- now; a handle that read an older count would write where no consumer reads.
local shards = redis.call('HGET', SETTINGS, 'shards')
if shards and shards ~= ARGV[3] then
  return redis.error_reply('DELAYQSHARDS ' .. shards)
end
local now = now_ms()
-- The earliest wake-up these messages add; announced when the task had nothing as early.
local earliest = nil
for i = 4, #ARGV, 4 do
  local due = now + tonumber(ARGV[i])
  if due > now then
    local wake = wake_for(due, now)
    if not earliest or wake < earliest then earliest = wake end
  end
end
local announce = earliest and not wakes_by(earliest)
local out = {}
for i = 4, #ARGV, 4 do
  local due = now + tonumber(ARGV[i])
  local id = ARGV[i + 1]
  local flags = INDEXED
  if id == '' then
    id = string.format('%x', math.floor(due / WIDTH)) .. '-' .. ARGV[i + 2]
    flags = 0
  end
  -- A caller's id is in `ids` while its message waits, is ready or in flight; a generated
  -- one (offered again with the id its first offer returned) is in `ids` once ready, and
  -- while delayed is found where its due second says (as cancel finds it).
  -- An acked one ('a') is kept only for the idempotency retention.
  local known = flags == INDEXED and redis.call('HGET', IDS, id)
  if known == 'a' then known = acked_and_kept(id, now) end
  if flags == INDEXED and (known
      or (bucket_of_generated(id) and take_delayed(id, true))) then
    out[#out + 1] = {id, 0, -1}
  else
    place(id, flags, 0, due, ARGV[i + 3], now)
    out[#out + 1] = {id, 1, due}
  end
end
if announce then
  redis.call('PUBLISH', KEYS[7], ms_string(earliest))
end
return out
