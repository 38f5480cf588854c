-- Acknowledge a delivery: the message is done.
-- KEYS, ARGV[1], ARGV[2]: see reliable_lib.lua.
-- ARGV[3] stream entry id of the delivery, ARGV[4] message id
-- Returns 1, or 0 when the delivery was no longer pending (already acked, or taken back
-- after its visibility timeout and delivered again).
if redis.call('EXISTS', READY) == 0 then return 0 end
if redis.call('XACK', READY, GROUP, ARGV[3]) == 0 then return 0 end
redis.call('XDEL', READY, ARGV[3])
-- The id's entry says where this delivery was ('r<sid>'); while it was pending no other
-- message could hold the id (offers of it were de-duplicated).
redis.call('HDEL', IDS, ARGV[4])
return 1
