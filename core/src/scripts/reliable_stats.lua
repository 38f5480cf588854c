-- Counts of a reliable queue.
-- KEYS, ARGV[1], ARGV[2]: see reliable_lib.lua.
-- Returns {delayed, ready, in flight, dead}.
local delayed = tonumber(redis.call('HGET', META, 'delayed') or '0')
local ready, inflight = 0, 0
if redis.call('EXISTS', READY) == 1 then
  local total = redis.call('XLEN', READY)
  inflight = redis.call('XPENDING', READY, GROUP)[1]
  ready = total - inflight
end
return {delayed, ready, inflight, redis.call('HLEN', DEAD)}
