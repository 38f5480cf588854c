-- Counts of a reliable queue.
-- KEYS, ARGV[1], ARGV[2]: see reliable_lib.lua. ARGV[3] the number of shards the caller
-- takes the queue to have (refused as reliable_offer.lua refuses it when the settings seen
-- here say otherwise: it would count a layout nobody uses).
-- Returns {delayed, ready, in flight, dead}. The group's pending count comes from
-- XINFO GROUPS, which does not walk the consumers.
local err = wrong_type_with_wheels(WHEEL, 'zset', NEAR, 'zset', READY, 'stream', DEAD, 'hash', META, 'hash',
  IDS, 'hash', ACKED, 'zset', DEAD_UNTIL, 'zset', DEAD_EARLIER, 'hash')
if err then return err end
local shards = redis.call('HGET', SETTINGS, 'shards')
if ARGV[3] and shards and shards ~= ARGV[3] then
  return redis.error_reply('DELAYQSHARDS ' .. shards)
end
expire_retained(now_ms(), 1000) -- dead letters past their retention are not counted
-- Never below 0 (a count that went below it before the transfer clamped it).
local delayed = math.max(0, tonumber(redis.call('HGET', META, 'delayed') or '0'))
local ready, inflight = 0, 0
if redis.call('EXISTS', READY) == 1 then
  local total = redis.call('XLEN', READY)
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', READY)) do
    local f = {}
    for i = 1, #g, 2 do f[g[i]] = g[i + 1] end
    if f['name'] == GROUP then inflight = tonumber(f['pending']) end
  end
  ready = total - inflight
end
return {delayed, ready, inflight, redis.call('HLEN', DEAD)}
