-- Acknowledge a delivery: the message is done.
-- KEYS, ARGV[1], ARGV[2]: see reliable_lib.lua.
-- ARGV[3] stream entry id of the delivery
-- Returns 1, or 0 when the delivery was no longer pending (already acked, or taken back
-- after its visibility timeout and delivered again).
local fields = finish_delivery(ARGV[3])
if not fields then return 0 end
if tonumber(fields['f']) == INDEXED then redis.call('HDEL', IDS, fields['i']) end
return 1
