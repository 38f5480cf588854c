-- Leases of deliveries (SPEC section 11): when a received message becomes visible again.
-- KEYS, ARGV[1], ARGV[2]: see reliable_lib.lua.
-- ARGV[3] 'start': ARGV[4..] stream entry ids just received (by XREADGROUP): each gets a
--   lease of the queue's visibility timeout.
-- ARGV[3] 'extend': ARGV[4] stream entry id, ARGV[5] ms: the lease ends that long from now
--   (like SQS's ChangeMessageVisibility: shorter than what is left shortens it).
-- Returns per entry the lease's end (server ms), or -1 when the delivery is no longer
-- pending (acked, nacked, or taken back after its lease ended).
local err = wrong_type(READY, 'stream', LEASES, 'zset')
if err then return err end
local now = now_ms()
local out = {}
local live = redis.call('EXISTS', READY) == 1
local function lease(sid, ms)
  if not live or not is_pending(sid) then return -1 end
  redis.call('ZADD', LEASES, now + ms, sid)
  return now + ms
end
if ARGV[3] == 'start' then
  -- The entries were just read by XREADGROUP, so they are pending: no check per entry,
  -- one ZADD for all. One whose lease comes later than a whole visibility timeout may
  -- have been taken back meanwhile; its lease then names a stream entry that is gone,
  -- which the reaper drops when it ends (it checks), and its ack reports the lease lost.
  local ends = now + settings().visibility_ms
  local scored = {}
  for i = 4, #ARGV do
    out[#out + 1] = live and ends or -1
    scored[#scored + 1] = ends
    scored[#scored + 1] = ARGV[i]
  end
  if live and #scored > 0 then call_chunked('ZADD', LEASES, scored) end
elseif ARGV[3] == 'extend' then
  out[1] = lease(ARGV[4], tonumber(ARGV[5]))
else
  return redis.error_reply('ERR unknown lease operation')
end
return out
