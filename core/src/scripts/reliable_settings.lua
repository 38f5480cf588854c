-- Read, create or update the settings of a reliable queue (SPEC section 11). They belong to
-- the queue: stored once, used by every handle and transfer task in every process.
-- KEYS, ARGV[1], ARGV[2]: see reliable_lib.lua.
-- ARGV[3] 'ensure' | 'update' | 'get'; ARGV[4] n = the number of named fields; then n
-- field/value pairs the handle named, then field/value pairs of the defaults.
-- 'ensure': creates the settings from the named fields and the defaults when there are
-- none (and some are named); fails when a named field differs from the stored one. 'update': overwrites the
-- named fields, and creates the settings (from the defaults for the rest) when there are none.
-- 'get': changes nothing.
-- Returns the stored settings as field/value pairs (the defaults when none are stored).
-- The queue's other keys are checked too: a queue whose keys hold other types gets no
-- settings written (its first call fails with WRONGTYPE and changes nothing).
local err = wrong_type_with_wheels(SETTINGS, 'hash', WHEEL, 'zset', NEAR, 'zset', READY, 'stream', IDS, 'hash',
  DEAD, 'hash', META, 'hash', LEASES, 'zset', ACKED, 'zset', DEAD_UNTIL, 'zset', DEAD_EARLIER, 'hash')
if err then return err end
local mode = ARGV[3]
local named = tonumber(ARGV[4])
local first_default = 5 + 2 * named
-- A handle that names nothing does not create them: the first handle that names some does
-- (SPEC section 11), so a consumer that starts first cannot fix a producer's settings. An
-- explicit update does, defaults and all (`delayq reliable configure Q` pins them).
if mode == 'update' or (mode == 'ensure' and not (named == 0 and redis.call('EXISTS', SETTINGS) == 0)) then
  local conflicts = {}
  for i = 5, first_default - 1, 2 do
    local stored = redis.call('HGET', SETTINGS, ARGV[i])
    if stored and stored ~= ARGV[i + 1] then
      if mode == 'update' then
        redis.call('HSET', SETTINGS, ARGV[i], ARGV[i + 1])
      else
        local what, unit = ARGV[i], ''
        if string.sub(what, -3) == '_ms' then what, unit = string.sub(what, 1, -4), ' ms' end
        -- In words, not the stored field: each language names the setting its own way.
        what = string.gsub(string.gsub(what, '^visibility$', 'visibility timeout'), '_', ' ')
        conflicts[#conflicts + 1] = what .. ' is ' .. stored .. unit .. ' in Redis, this handle names ' .. ARGV[i + 1] .. unit
      end
    elseif not stored then
      redis.call('HSET', SETTINGS, ARGV[i], ARGV[i + 1])
    end
  end
  if #conflicts > 0 then
    return redis.error_reply('DELAYQSETTINGS the settings of ' .. string.sub(PREFIX, 1, -2) .. ' differ: ' .. table.concat(conflicts, '; '))
  end
  for i = first_default, #ARGV, 2 do
    redis.call('HSETNX', SETTINGS, ARGV[i], ARGV[i + 1])
  end
end
local out = redis.call('HGETALL', SETTINGS)
if #out == 0 then
  for i = first_default, #ARGV do out[#out + 1] = ARGV[i] end
end
return out
