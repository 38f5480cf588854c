-- Give a delivery back: retried after a delay, or buried after its last attempt.
-- KEYS, ARGV[1], ARGV[2]: see reliable_lib.lua. KEYS[7] wake channel.
-- ARGV[3] stream entry id of the delivery, ARGV[4] delay ms, or -1 for the queue's
-- back-off, ARGV[5] jitter in [0.5, 1] for the back-off, ARGV[6] '1' to count the delivery
-- as an attempt, '0' to give it back untouched (a receive abandoned by its caller)
-- Returns 1 when it will be retried, 2 when it went to the dead letters, 0 when the
-- delivery was no longer pending.
local err = wrong_type_with_wheels(WHEEL, 'zset', NEAR, 'zset', READY, 'stream', IDS, 'hash', DEAD, 'hash',
  META, 'hash', LEASES, 'zset', DEAD_UNTIL, 'zset', DEAD_EARLIER, 'hash')
if err then return err end
local fields = finish_delivery(ARGV[3])
if not fields then return 0 end
local now = now_ms()
local attempts = tonumber(fields['a']) + tonumber(ARGV[6])
if ARGV[6] == '1' and attempts >= settings().max_attempts then
  bury(fields['i'], tonumber(fields['f']), attempts, fields['p'], now)
  return 2
end
local delay = tonumber(ARGV[4])
if delay < 0 then delay = backoff_ms(attempts, tonumber(ARGV[5])) end
local due = now + delay
-- Given back untouched and at once, it keeps the due time it was delivered with (its
-- lateness stays true), though it joins the end of the ready messages.
if ARGV[6] == '0' and delay == 0 and fields['d'] then due = math.min(now, tonumber(fields['d'])) end
local before = next_wake()
-- Its bucket is no longer the one in a generated id: index it.
place(fields['i'], INDEXED, attempts, due, fields['p'], now)
local after = next_wake()
if after >= 0 and (before < 0 or after < before) then
  redis.call('PUBLISH', KEYS[7], ms_string(after))
end
return 1
