-- Move a message that no consumer has received yet (delayed, or ready) to a new due time.
-- KEYS, ARGV[1], ARGV[2]: see reliable_lib.lua. KEYS[7] wake channel.
-- ARGV[3] id, ARGV[4] delay ms from now
-- Returns the new due time, or -1 when no such message has that id (unknown, in flight, dead).
local err = wrong_type_with_wheels(WHEEL, 'zset', NEAR, 'zset', READY, 'stream', IDS, 'hash', META, 'hash')
if err then return err end
local attempts, flags, due, payload = take_delayed(ARGV[3])
if not attempts then
  local fields = take_ready(ARGV[3])
  if not fields then return -1 end
  attempts, payload = tonumber(fields['a']), fields['p']
end
local now = now_ms()
local at = now + tonumber(ARGV[4])
-- Announced when the transfer task had no work as early as this message now brings.
local wake = at > now and wake_for(at, now)
local announce = wake and not wakes_by(wake)
place(ARGV[3], INDEXED, attempts, at, payload, now)
if announce then
  redis.call('PUBLISH', KEYS[7], ms_string(wake))
end
return at
