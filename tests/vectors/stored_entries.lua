-- For the bindings' vector tests: whether each entry of a delayed queue's list (KEYS[1],
-- Redisson's `redisson_delay_queue:{N}`) is what this Redis's own
-- struct.pack('Bc0Lc0', #id, id, #value, value) makes of its id and value.
-- Returns, per entry in offer order, '1 <SHA-1 of the value>' (or '0 ...' when not).
local out = {}
for _, entry in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do
  local id, value = struct.unpack('Bc0Lc0', entry)
  local same = struct.pack('Bc0Lc0', #id, id, #value, value) == entry
  out[#out + 1] = (same and '1 ' or '0 ') .. redis.sha1hex(value)
end
return out
