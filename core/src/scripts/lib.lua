-- Shared helpers, prepended to every script by scripts.rs.

-- The server's clock in Unix milliseconds: due times never depend on a client's clock.
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Checks that each key is absent or of the expected type; returns an error reply to
-- hand back before anything is written, or nil. Pairs: key, type, key, type, ...
local function wrong_type(...)
  local args = {...}
  for i = 1, #args, 2 do
    local t = redis.call('TYPE', args[i])['ok']
    if t ~= 'none' and t ~= args[i + 1] then
      return redis.error_reply('WRONGTYPE key ' .. args[i] .. ' holds a ' .. t .. ', not a ' .. args[i + 1])
    end
  end
  return nil
end

-- Unpacks a Redisson entry; returns the value, or nil when the bytes are not exactly
-- one 'Bc0Lc0' entry.
local function unpack_value(packed)
  local ok, id, value, pos = pcall(struct.unpack, 'Bc0Lc0', packed)
  if ok and pos == #packed + 1 then
    return value
  end
  return nil
end

-- Integer milliseconds as a decimal string (tostring would print 1.7e+12).
local function ms_string(x)
  return string.format('%d', x)
end

-- Calls a variadic command over a long list of arguments in chunks, staying under
-- Lua's limit on unpack().
local function call_chunked(cmd, key, items)
  local n = #items
  for i = 1, n, 1000 do
    redis.call(cmd, key, unpack(items, i, math.min(i + 999, n)))
  end
end
