-- Extend a delivery's lease (SPEC section 11). A lease starts when XREADGROUP delivers an
-- entry and lasts the queue's visibility timeout, counted from the delivery time in the
-- pending list; an end recorded here in LEASES replaces that (reliable_transfer.lua).
-- KEYS, ARGV[1], ARGV[2]: see reliable_lib.lua. KEYS[7] wake channel.
-- ARGV[3] 'extend': ARGV[4] stream entry id, ARGV[5] ms: the lease ends that long from now
--   (like SQS's ChangeMessageVisibility: shorter than what is left shortens it).
-- Returns {the lease's end (server ms)}, or {-1} when the delivery is no longer pending
-- (acked, nacked, or taken back after its lease ended).
local err = wrong_type(READY, 'stream', LEASES, 'zset')
if err then return err end
if ARGV[3] ~= 'extend' then return redis.error_reply('ERR unknown lease operation') end
local sid, ms = ARGV[4], tonumber(ARGV[5])
if redis.call('EXISTS', READY) == 0 then return {-1} end
local row = redis.call('XPENDING', READY, GROUP, sid, sid, 1)[1]
if not row then return {-1} end
local now = now_ms()
local ends = now + ms
local before = tonumber(redis.call('ZSCORE', LEASES, sid))
  or now - tonumber(row[3]) + settings().visibility_ms
redis.call('ZADD', LEASES, ends, sid)
-- Its idle time starts again (same consumer; JUSTID counts no delivery): a lease that is
-- kept extended (consume extends every third of it) never shows among the deliveries idle
-- past the visibility timeout that the transfer script pages through.
redis.call('XCLAIM', READY, GROUP, row[2], 0, sid, 'JUSTID')
-- Shortened: the transfer task may be asleep until the old end.
if ends < before then redis.call('PUBLISH', KEYS[7], ms_string(ends)) end
return {ends}
