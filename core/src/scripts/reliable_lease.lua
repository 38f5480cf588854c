-- Leases of deliveries (SPEC section 11): when a received message becomes visible again.
-- KEYS, ARGV[1], ARGV[2]: see reliable_lib.lua.
-- ARGV[3] 'start': ARGV[4..] stream entry ids just received: each gets a lease of the
--   queue's visibility timeout.
-- ARGV[3] 'extend': ARGV[4] stream entry id, ARGV[5] ms: the lease ends that long from now
--   (like SQS's ChangeMessageVisibility: shorter than what is left shortens it).
-- Returns per entry the lease's end (server ms), or -1 when the delivery is no longer
-- pending (acked, nacked, or taken back after its lease ended).
local err = wrong_type(READY, 'stream', LEASES, 'zset')
if err then return err end
local now = now_ms()
local out = {}
local function lease(sid, ms)
  if redis.call('EXISTS', READY) == 0 or not is_pending(sid) then return -1 end
  redis.call('ZADD', LEASES, now + ms, sid)
  return now + ms
end
if ARGV[3] == 'start' then
  local visibility = settings().visibility_ms
  for i = 4, #ARGV do out[#out + 1] = lease(ARGV[i], visibility) end
elseif ARGV[3] == 'extend' then
  out[1] = lease(ARGV[4], tonumber(ARGV[5]))
else
  return redis.error_reply('ERR unknown lease operation')
end
return out
