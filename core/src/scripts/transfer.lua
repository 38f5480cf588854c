-- Move due entries of a delayed queue to its destination, within a time budget per call.
-- KEYS[1] destination list, KEYS[2] timeout set, KEYS[3] queue list, KEYS[4] corrupt list
-- ARGV[1] batch size (most entries moved per call), ARGV[2] time budget in microseconds,
-- ARGV[3..6] the sweep state returned by the previous call of this pass (0s at first),
-- ARGV[7] '1' to pop the head of the destination at the end (a poll: in the same call, so
-- that no other process's transfer can move an entry between the pop and the moves)
-- Returns {moved, next due time in server ms or -1, server now in ms, sweep state (four
-- numbers), entries set aside, the popped head or false}. While next due <= now, due
-- entries remain: call again with the state.
-- Entries that cannot be unpacked go to the corrupt list so they never block those behind
-- them.
--
-- Why a budget: the queue list holds every waiting entry in offer order (Redisson reads
-- it: size, contains, remove, readAll, poll), and a list can only be searched by scanning
-- it: LREM passes about 17 ns per entry, 17 ms for a million. One LREM per due entry away
-- from the ends of the list, as Redisson's transfer does, blocked Redis for 15 s on a batch
-- of 1000 among a million. So each call does what fits in the budget, and what it does not
-- reach stays due, untouched, for the next call:
-- 1. Runs of due entries at the head of the list (delays that come due in offer order, a
--    backlog) and at its tail (short delays offered last) are cut off with LTRIM.
-- 2. At most FEW due entries elsewhere, when no sweep is under way and a scan of the
--    whole list fits in half the budget (up to about 500,000 entries): each is looked for in
--    the tail half (LPOS with MAXLEN) and removed with LREM from the nearer end, at most one
--    scan of the list per entry, while the budget lasts (the first one always, so that each
--    call makes progress).
-- 3. More of them: the list is swept in windows from both ends inwards, on the side whose
--    cursor is nearer its end; the cursors come back from the caller on the next call. A
--    due entry found in a window is overwritten in place with a tombstone (LSET walks the
--    list's nodes, it does not scan), and one LREM per call removes the tombstones from
--    that end. Due means: among the due entries when there are at most WANTED of them
--    (ZRANGEBYSCORE), else a score <= now (ZMSCORE). The sweep stops when the budget is
--    spent, counting the closing LREM (at the cost per entry measured by an earlier call)
--    for at most half of it: a call takes about the budget, or half of it plus one scan of
--    half the list where that scan alone takes more (beyond a million entries).
-- 4. When the sweep has gone through a list's worth of entries without finding any while
--    entries are due, these are not in the list (a state Redisson's scripts never leave):
--    they are moved as in 2, where LREM finds nothing and the value is moved anyway, as
--    Redisson's transfer does.
-- Only what is taken out of the list (or known to be absent from it) is moved, within the
-- call, so nothing is lost or duplicated, and the list keeps the other entries in order.
local err = wrong_type(KEYS[1], 'list', KEYS[2], 'zset', KEYS[3], 'list', KEYS[4], 'list')
if err then return err end
local dest, zset, list, corrupt = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local batch = tonumber(ARGV[1])
local budget = tonumber(ARGV[2])
-- Sweep cursors (entries already swept from the head, from the tail), entries swept since
-- one was last found, and the closing LREM's measured cost in ns per entry passed.
local head, tail = tonumber(ARGV[3]), tonumber(ARGV[4])
local idle, scan_ns = tonumber(ARGV[5]), tonumber(ARGV[6])
if scan_ns <= 0 then scan_ns = 20 end -- measured on an idle machine: 17

local FEW = 16
local WINDOW = 500
local RUN_WINDOW = 1000
-- Due entries that a sweep looks for by name (a table lookup per entry it reads); with more,
-- it asks the sorted set for the score of each entry it reads (ZMSCORE, slower).
local WANTED = 1000
-- Entries a sweep marks before it may stop for the budget: the closing LREM is paid anyway.
local MIN_MARKED = 64

local function clock_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local start = clock_us()
local now = math.floor(start / 1000)
local function spent()
  return clock_us() - start
end

local moved, taken, set_aside = 0, {}, 0
-- The values a call moves and their due times (every step below reads the scores it needs
-- anyway): the destination gets them oldest due first, as Redisson's transfer (which moves
-- in due order) would give them, wherever in the list each was found. `ordered` while they
-- came in order (a backlog due in offer order, the common case, is not sorted).
local vals, dues, ordered, removed = {}, {}, true, {}
-- `ranked`: the caller removes it from the sorted set itself, with its rank.
local function take(entry, due, ranked)
  if taken[entry] then return end
  taken[entry] = true
  moved = moved + 1
  if not ranked then removed[#removed + 1] = entry end
  local value = unpack_value(entry)
  if value then
    local n = #vals + 1
    due = due or now
    if n > 1 and due < dues[n - 1] then ordered = false end
    vals[n], dues[n] = value, due
  else
    redis.call('RPUSH', corrupt, entry)
    set_aside = set_aside + 1
    redis.log(redis.LOG_WARNING, 'delayq: moved an undecodable entry of ' .. zset .. ' to ' .. corrupt)
  end
end
-- Takes what was taken so far out of the sorted set (inside the budget: ZREM costs
-- microseconds per entry).
local function flush()
  call_chunked('ZREM', zset, removed)
  removed = {}
end
-- Hands the values of the call to the destination, oldest due first (in the order taken
-- among equal due times).
local function deliver()
  if not ordered then
    local order = {}
    for i = 1, #vals do order[i] = i end
    table.sort(order, function(a, b)
      if dues[a] ~= dues[b] then return dues[a] < dues[b] end
      return a < b
    end)
    local sorted = {}
    for i, k in ipairs(order) do sorted[i] = vals[k] end
    vals = sorted
  end
  call_chunked('RPUSH', dest, vals)
end
-- The due entries among the earliest `n`, each with its due time.
local function earliest_due(n)
  local due = {}
  local reply = redis.call('ZRANGEBYSCORE', zset, '-inf', now, 'WITHSCORES', 'LIMIT', 0, n)
  for i = 1, #reply, 2 do due[reply[i]] = tonumber(reply[i + 1]) end
  return due, reply
end

local function is_due(entry)
  local score = redis.call('ZSCORE', zset, entry)
  return score and tonumber(score) <= now
end
-- For each entry of `window`: its due time when it is due, else false.
local function due_flags(window)
  local flags = {}
  local scores = redis.call('ZMSCORE', zset, unpack(window))
  for i = 1, #window do
    local score = scores[i] and tonumber(scores[i])
    flags[i] = score and score <= now and score
  end
  return flags
end

-- 1. Runs at the ends. The leading run is first looked for among the earliest due entries
-- (a sequential read of the sorted set): when delays come due in offer order, these are the
-- head of the list. Else, and at the tail, by the score of each entry (ZMSCORE).
-- A window is no longer than the due entries left (`due_count`, counted at the start of the
-- call): a run is made of due entries only, and reading (and scoring) a thousand entries
-- to move five made each call of a steady stream cost about half a millisecond of Redis's
-- time (`INFO commandstats`: LRANGE 44 us, ZMSCORE 431 us).
local function window_size(due_count)
  return math.max(1, math.min(RUN_WINDOW, batch - moved, due_count - moved))
end
local function head_runs(due_count)
  while moved < batch and spent() < budget do
    local first = redis.call('LINDEX', list, 0)
    if not first or not is_due(first) then return end
    local n = window_size(due_count)
    local window = redis.call('LRANGE', list, 0, n - 1)
    -- The earliest due entries, with their due times (a sequential read of the sorted
    -- set): the head run's entries are among them when delays come due in offer order, and
    -- then no score is read entry by entry. When they are every due entry left, the run
    -- ends at the first entry that is not among them.
    local reply = redis.call('ZRANGEBYSCORE', zset, '-inf', now, 'WITHSCORES', 'LIMIT', 0, n)
    local due_of = {}
    for i = 1, #reply, 2 do due_of[reply[i]] = tonumber(reply[i + 1]) end
    local run = 0
    while run < #window and due_of[window[run + 1]] do run = run + 1 end
    local all_due = #reply / 2 < n or n >= due_count - moved
    if run == #window or all_due then
      -- A run that is the earliest due entries themselves (a backlog due in offer order;
      -- equal due times in any order) is the sorted set's first `run` ranks, as nothing
      -- taken is left unflushed here: one ZREMRANGEBYRANK removes them, where ZREM looks
      -- up each one.
      local first, ranked = {}, true
      for k = 1, math.min(run, #reply / 2) do first[reply[2 * k - 1]] = true end
      for i = 1, run do
        if not first[window[i]] then
          ranked = false
          break
        end
        first[window[i]] = nil -- an entry twice in the list is not two ranks
      end
      for i = 1, run do take(window[i], due_of[window[i]], ranked) end
      -- An ACL user set up by the rule of an earlier release (docs/security.md) may not
      -- run ZREMRANGEBYRANK: then they leave by ZREM, as before.
      if ranked and run > 0 then
        local out = redis.pcall('ZREMRANGEBYRANK', zset, 0, run - 1)
        if type(out) == 'table' and out.err then
          for i = 1, run do removed[#removed + 1] = window[i] end
        end
      end
    else
      local flags = due_flags(window)
      run = 0
      while run < #window and flags[run + 1] do run = run + 1 end
      for i = 1, run do take(window[i], flags[i]) end
    end
    redis.call('LTRIM', list, run, -1)
    head = math.max(0, head - run)
    flush()
    if run < #window then return end
  end
end
local function tail_runs(due_count)
  while moved < batch and spent() < budget do
    local last = redis.call('LINDEX', list, -1)
    if not last or not is_due(last) then return end
    local window = redis.call('LRANGE', list, -window_size(due_count), -1)
    local flags = due_flags(window)
    local from = #window + 1
    while from > 1 and flags[from - 1] do from = from - 1 end
    for i = from, #window do take(window[i], flags[i]) end
    local run = #window - from + 1
    redis.call('LTRIM', list, 0, -run - 1)
    tail = math.max(0, tail - run)
    flush()
    if from > 1 then return end
  end
end

-- 2. and 4. One LREM each, from the nearer end; returns whether any was in the list.
-- `due`: the due time of each entry.
local function remove_each(entries, due)
  local longest, found = 0, false
  for i, entry in ipairs(entries) do
    local t0 = clock_us()
    if i > 1 and (t0 - start + longest > budget or moved >= batch) then break end
    local half = math.floor(redis.call('LLEN', list) / 2) + 1
    local n
    if redis.call('LPOS', list, entry, 'RANK', -1, 'MAXLEN', half) then
      n = redis.call('LREM', list, -1, entry)
    else
      n = redis.call('LREM', list, 1, entry)
    end
    if n > 0 then found = true end
    take(entry, due[entry])
    flush()
    longest = math.max(longest, clock_us() - t0)
  end
  return found
end

-- 3. The sweep, on the side nearer its end: 0 from the head, 1 from the tail.
local function sweep(len, wanted)
  local side = 0
  if tail < head then side = 1 end
  local tomb = 'delayq:tombstone:' .. string.format('%d', start)
  local marked, scanned = 0, 0
  local function depth()
    if side == 0 then return head end
    return tail
  end
  -- Whether the budget is spent, counting the closing LREM to come, but for at most half
  -- the budget: deep in a very long list, where that LREM alone takes more, a call still
  -- sweeps for half the budget, so that one LREM serves many entries.
  local function over(extra)
    return spent() + math.min(depth() * scan_ns / 1000, budget / 2) + extra > budget
  end
  local fetch_us = 0 -- what reading and checking the last window took
  while moved < batch do
    -- The first window always: each call makes progress.
    if scanned > 0 and over(fetch_us) then break end
    local count = math.min(WINDOW, len - head - tail)
    if count <= 0 then break end
    local t0 = clock_us()
    local from = head
    if side == 1 then from = len - tail - count end
    local window = redis.call('LRANGE', list, from, from + count - 1)
    local flags
    if wanted then
      flags = {}
      for i, entry in ipairs(window) do flags[i] = wanted[entry] or false end
    else
      flags = due_flags(window)
    end
    fetch_us = clock_us() - t0
    -- In the sweep's direction, so that stopping midway leaves the cursor right.
    local stop = false
    for k = 1, #window do
      local i = k
      if side == 1 then i = #window - k + 1 end
      local entry = window[i]
      scanned = scanned + 1
      if side == 0 then head = head + 1 else tail = tail + 1 end
      if flags[i] and not taken[entry] then
        redis.call('LSET', list, from + i - 1, tomb)
        take(entry, flags[i])
        marked = marked + 1
        if moved >= batch then
          stop = true
          break
        end
        if marked % 16 == 0 then
          flush()
          if marked >= MIN_MARKED and over(0) then
            stop = true
            break
          end
        end
      end
    end
    flush()
    if stop then break end
  end
  if marked > 0 then
    local t0 = clock_us()
    local reach = depth()
    if side == 0 then
      redis.call('LREM', list, marked, tomb)
      head = head - marked
    else
      redis.call('LREM', list, -marked, tomb)
      tail = tail - marked
    end
    if reach >= 50000 then
      scan_ns = math.min(500, math.max(5, math.floor((clock_us() - t0) * 1000 / reach)))
    end
    idle = 0
  else
    idle = idle + scanned
  end
end

local due_count = redis.call('ZCOUNT', zset, '-inf', now)
if due_count > 0 then
  head_runs(due_count)
  tail_runs(due_count)
  local left = due_count - moved
  -- Past the runs, at least one entry or one window per call, whatever the budget says:
  -- each call makes progress.
  if left > 0 and moved < batch then
    local len = redis.call('LLEN', list)
    if head + tail >= len then head, tail = 0, 0 end -- a cycle ended: start again at the ends
    -- A sweep under way goes on: what it has not reached yet lies ahead of it. And one
    -- LREM each only where a scan of the whole list fits in half the budget.
    local few = left <= FEW and head + tail == 0 and len * scan_ns / 1000 <= budget / 2
    if idle >= len or few then
      local due, reply = earliest_due(FEW)
      local entries = {}
      for i = 1, #reply, 2 do entries[#entries + 1] = reply[i] end
      if remove_each(entries, due) then idle = 0 end
    elseif left <= WANTED then
      sweep(len, (earliest_due(WANTED)))
    else
      sweep(len, nil)
    end
  end
end
flush()
deliver()
local nxt = redis.call('ZRANGE', zset, 0, 0, 'WITHSCORES')
local next_due = -1
if nxt[1] then next_due = tonumber(nxt[2]) end
local popped = false
if ARGV[7] == '1' then popped = redis.call('LPOP', dest) end
return {moved, next_due, now, head, tail, idle, scan_ns, set_aside, popped}
