-- Give a delivery back: retried after a delay, or buried after its last attempt.
-- KEYS, ARGV[1], ARGV[2]: see reliable_lib.lua. KEYS[7] wake channel.
-- ARGV[3] stream entry id of the delivery, ARGV[4] delay ms, ARGV[5] max attempts,
-- ARGV[6] '1' to count the delivery as an attempt, '0' to give it back untouched (a
-- receive abandoned by its caller)
-- Returns 1 when it will be retried, 2 when it went to the dead letters, 0 when the
-- delivery was no longer pending.
local fields = finish_delivery(ARGV[3])
if not fields then return 0 end
local now = now_ms()
local attempts = tonumber(fields['a']) + tonumber(ARGV[6])
if ARGV[6] == '1' and attempts >= tonumber(ARGV[5]) then
  bury(fields['i'], tonumber(fields['f']), attempts, fields['p'], now)
  return 2
end
local before = next_wake()
-- Its bucket is no longer the one in a generated id: index it.
place(fields['i'], INDEXED, attempts, now + tonumber(ARGV[4]), fields['p'], now)
local after = next_wake()
if after >= 0 and (before < 0 or after < before) then
  redis.call('PUBLISH', KEYS[7], ms_string(after))
end
return 1
