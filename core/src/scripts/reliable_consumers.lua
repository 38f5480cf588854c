-- Remove consumers from the group that hold nothing and are gone (SPEC section 11: a
-- process restart loop must not grow the group).
-- KEYS, ARGV[1], ARGV[2]: see reliable_lib.lua.
-- ARGV[3] 'idle': removes every consumer with no pending delivery idle for ARGV[4] ms;
-- ARGV[3] 'leave': removes consumer ARGV[4] if it has no pending delivery.
-- Returns how many consumers were removed.
local err = wrong_type(READY, 'stream')
if err then return err end
if redis.call('EXISTS', READY) == 0 then return 0 end
local removed = 0
local ok, consumers = pcall(redis.call, 'XINFO', 'CONSUMERS', READY, GROUP)
if not ok then return 0 end
for _, c in ipairs(consumers) do
  local f = {}
  for i = 1, #c, 2 do f[c[i]] = c[i + 1] end
  local idle_gone = ARGV[3] == 'idle' and tonumber(f['idle']) >= tonumber(ARGV[4])
  local leaving = ARGV[3] == 'leave' and f['name'] == ARGV[4]
  if tonumber(f['pending']) == 0 and (idle_gone or leaving) then
    redis.call('XGROUP', 'DELCONSUMER', READY, GROUP, f['name'])
    removed = removed + 1
  end
end
return removed
