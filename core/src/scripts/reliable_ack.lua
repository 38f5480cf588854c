-- Acknowledge deliveries: their messages are done.
-- KEYS, ARGV[1], ARGV[2]: see reliable_lib.lua.
-- ARGV[3..] pairs: stream entry id of a delivery, message id
-- Returns per pair 1, or 0 when the delivery was no longer pending (already acked, or
-- taken back after its lease ended and delivered again).
local err = wrong_type(READY, 'stream', IDS, 'hash', LEASES, 'zset', ACKED, 'zset')
if err then return err end
local now = now_ms()
local out = {}
local live = redis.call('EXISTS', READY) == 1
local sids, ids = {}, {}
for i = 3, #ARGV, 2 do
  local sid, id = ARGV[i], ARGV[i + 1]
  if live and redis.call('XACK', READY, GROUP, sid) == 1 then
    sids[#sids + 1] = sid
    ids[#ids + 1] = id
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
if #sids > 0 then
  -- One XDEL for the batch: Redis looks for the stream's new first entry once per XDEL,
  -- scanning past the deleted ones, which made one XDEL per ack the costliest step.
  call_chunked('XDEL', READY, sids)
  call_chunked('ZREM', LEASES, sids)
  -- The id's entry says where this delivery was ('r<sid>'); while it was pending no
  -- other message could hold the id (offers of it were de-duplicated).
  forget_ids(ids, now)
end
return out
