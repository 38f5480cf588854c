-- Receive: reads up to ARGV[4] entries no consumer has had yet, for consumer ARGV[3],
-- without blocking, and starts their leases: what XREADGROUP and then the lease script's
-- 'start' do, in one round trip (the receive of a busy queue).
-- KEYS, ARGV[1], ARGV[2]: see reliable_lib.lua.
-- Returns {lease end (server ms), entries as XREADGROUP gives them}, or {} when no entry
-- was ready (the caller then blocks on XREADGROUP itself: a script cannot wait).
local err = wrong_type(READY, 'stream', LEASES, 'zset')
if err then return err end
local function read()
  return redis.pcall('XREADGROUP', 'GROUP', GROUP, ARGV[3], 'COUNT', ARGV[4], 'STREAMS', READY, '>')
end
local reply = read()
if type(reply) == 'table' and reply.err then
  if not string.find(reply.err, 'NOGROUP', 1, true) then return reply end
  -- A stream without the group (or no stream yet): create it, as a first receive does.
  local made = redis.pcall('XGROUP', 'CREATE', READY, GROUP, '0', 'MKSTREAM')
  if type(made) == 'table' and made.err and not string.find(made.err, 'BUSYGROUP', 1, true) then
    return made
  end
  reply = read()
  if type(reply) == 'table' and reply.err then return reply end
end
if not reply or not reply[1] then return {} end
local entries = reply[1][2]
if #entries == 0 then return {} end
local ends = now_ms() + settings().visibility_ms
local scored = {}
for _, entry in ipairs(entries) do
  scored[#scored + 1] = ends
  scored[#scored + 1] = entry[1]
end
call_chunked('ZADD', LEASES, scored)
return {ends, entries}
