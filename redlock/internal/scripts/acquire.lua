-- Take the lock if it is free (SET NX PX, atomically), or add our hold to
-- it if our token already holds it (re-entry).
--
-- KEYS[1]  the lock key
-- KEYS[2]  the key's fencing counter        (fencing or guard mode only)
-- KEYS[3]  the node's memory marker          (fencing or guard mode only)
-- KEYS[4]  the node's quarantine key         (fencing or guard mode only)
-- ARGV[1]  the value: token .. "\0" .. hold id .. "\0" .. metadata (see
--          holds.lua)
-- ARGV[2]  TTL in milliseconds
-- ARGV[3]  token .. "\0" (the value's prefix)
-- ARGV[4]  "1" to return a fencing token      (optional)
-- ARGV[5]  restart guard: the maximum TTL in ms, "0" for off (optional)
-- ARGV[6]  the fencing counter's lifetime in ms (with ARGV[4] = "1")
-- ARGV[7]  the client's start for a counter, in µs since 1970 (optional;
--          used only within this server's last 200 ms, see below)
--
-- Returns, when granted: the fencing token in fencing mode (the counter,
-- raised in this same step for a new holder), else 0 for a new holder
-- and n >= 2 for a re-entry with n holds. When another token holds the key
-- (or a cooldown keeps it, with no hold left):
-- -(PTTL + 2) of that holder, so the caller can sleep until it may expire
-- (-1: the key has no expiry). With the restart guard on, a node that lost
-- its memory answers an ABSTAIN error until the maximum TTL has passed, and
-- a node that may evict keys answers ABSTAIN instead of being stamped.
-- When the key holds our hold id already, this server granted this very
-- acquisition before, reached through another node address: a DUPLICATE
-- error, never a second vote (and never a re-entry: a re-entry is another
-- handle's acquisition, with a hold id of its own).
--[[holds.lua]]
local guard = tonumber(ARGV[5] or '0')
if guard > 0 then
  -- The marker (no expiry) holds the server's run_id and its count of
  -- evicted keys when it was stamped. The run_id is new on every process
  -- start and differs on a promoted replica, so a marker that is missing or
  -- whose stamp differs means this node may have forgotten locks it
  -- granted: it was flushed, restarted (without persistence, or reloading
  -- an RDB snapshot or an AOF that lacks the last writes), is a replica
  -- that never saw the latest grants, or evicted keys. It then stays out of
  -- every vote until any lock it forgot has surely expired, and is stamped
  -- anew. INFO is read on every call: the Lua state keeps nothing between
  -- calls, a stamp cached by the client could not see a restart behind a
  -- proxy that keeps the client's connection, and keys may be evicted at
  -- any moment.
  local info = redis.pcall('INFO', 'server', 'stats')
  if type(info) ~= 'string' then
    return redis.error_reply('ABSTAIN the restart guard needs Redis 7.0 or later (INFO of several sections)')
  end
  -- Plain searches: a pattern run over the whole reply costs more than
  -- INFO itself.
  local function field(name, pattern)
    local i = string.find(info, '\r\n' .. name .. ':', 1, true)
    return i and string.match(info, pattern, i + #name + 3)
  end
  local run, evicted = field('run_id', '^%x+'), field('evicted_keys', '^%d+')
  if not (run and evicted) then
    return redis.error_reply('ABSTAIN INFO shows no run_id or evicted_keys')
  end
  local stamp = run .. ' ' .. evicted
  if redis.call('GET', KEYS[3]) ~= stamp then
    -- First contact, or a loss. A node that may evict keys (volatile-*
    -- picks exactly the keys with a TTL) is never stamped, so it is asked
    -- again next time; one set to evict later is caught by its count of
    -- evicted keys, before it can grant again. Read here only: the memory
    -- section is the dearest part of INFO.
    info = redis.call('INFO', 'memory')
    local policy = field('maxmemory_policy', '^[%w-]+')
    if policy ~= 'noeviction' and field('maxmemory', '^%d+') ~= '0' then
      return redis.error_reply('ABSTAIN maxmemory-policy ' .. tostring(policy) .. ' may evict lock keys: set noeviction or maxmemory 0')
    end
    -- A quarantine already running is only ever lengthened. It lasts two
    -- fence windows (200 ms, see below) longer than the maximum TTL: a
    -- counter that went back meets a start up to that old, not the clock.
    if redis.call('PTTL', KEYS[4]) < guard + 200 then
      redis.call('SET', KEYS[4], '1', 'PX', guard + 200)
    end
    redis.call('SET', KEYS[3], stamp)
  end
  local left = redis.call('PTTL', KEYS[4])
  if left > 0 then
    return redis.error_reply('ABSTAIN node lost its memory, abstains for ' .. left .. ' ms more')
  end
end
local fenced = ARGV[4] == '1'
-- startCounter sets the fencing counter to now, this server's clock in
-- microseconds since 1970, with its lifetime (ARGV[6]), and returns it.
-- Such values stay below 2^53 until the year 2255, so Lua's doubles hold
-- them exactly and Redis returns them as exact integers; only tostring
-- would round them (to 14 digits), hence %.0f. Made only when fencing.
local startCounter
if fenced then
  startCounter = function(now)
    redis.call('SET', KEYS[2], string.format('%.0f', now), 'PX', ARGV[6])
    return now
  end
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if fenced then
    -- The counter becomes max(counter + 1, this server's clock in
    -- microseconds). It grows by one per holder, far slower than the
    -- clock, so fences follow time. A node whose counter is gone (it
    -- expired, or the node lost its memory) or went back (a snapshot
    -- reloaded, a replica promoted) starts again from its clock. That is
    -- above every fence handed out before, as long as this clock is not
    -- behind those fences by as much as the time since they were written
    -- here: about the counter's lifetime (ARGV[6], see below) when it
    -- expired; with the restart guard, at least its
    -- maximum TTL after a loss, since the node abstains that long.
    -- The clock is counted in numbers (see startCounter).
    --
    -- The clock is read in windows of 100 ms (the start of the current
    -- one), so that nodes which granted the same holders of the key answer
    -- the same count, and the client then needs no second round trip to
    -- write the fence back (see acquire.go, writeBackFence). A node jumps
    -- to a new window's start at its first grant in that window; nodes
    -- whose grants of one acquisition fall on both sides of a window's
    -- start disagree, so a longer window makes that rarer (with 10 ms
    -- windows, about a quarter of the acquisitions under load).
    --
    -- The client sends every node of an acquisition the same start
    -- (ARGV[7]: its own clock a little back, on the windows' 100 ms grid,
    -- see kind.go, fenceStart); a node takes it in place of its window's
    -- start when it lies within this server's last 200 ms (two windows).
    -- Then the nodes agree even when their grants fall on both sides of a
    -- window's start, as under deep queues they mostly do; a start out of
    -- that range (a client's clock off by more than the allowance, or a
    -- grant late by two windows) is the window's. A counter that is gone
    -- (INCR gives 1: a key's first grant, or one after its counter
    -- expired) starts from the start too, so that the nodes agree on a
    -- fresh key's first fence and need no write-back round for it.
    --
    -- Fences stay at or below the exact clock; a counter that restarts
    -- from a start or a window's start may be up to two windows below it,
    -- so each case of a lost counter keeps its margin as follows. One that
    -- expired did so when this clock had passed its count by its lifetime
    -- less two windows (see below): the margin is the lifetime less four
    -- windows, against this clock stepping back. One that was lost or went
    -- back is used, under the restart guard, only after a quarantine two
    -- windows longer than the maximum TTL. Without the guard (which such a
    -- node's locks need anyway), the margin there is the time since the
    -- lost fences were written less two windows.
    --
    -- The counter's expiry (its lifetime, ARGV[6]) is set when a grant
    -- starts it again from the clock (a fresh start, a new start's or a
    -- window's first grant), not at every grant: one command less for a
    -- busy key, whose grants count on by one (INCR) between starts, which
    -- move every 100 ms. A counter so set is at most the clock. It then
    -- grows by one per grant (a node makes far fewer than one per
    -- microsecond), far slower than the clock, so a grant more than two
    -- windows later finds it below its start (or its window's) and sets it
    -- again: the last expiry was set at most about two windows before any
    -- grant, and a counter lives at least its lifetime less 200 ms after
    -- its last grant. A write-back (fence.lua) that raises it above this
    -- clock adds the lead to its lifetime, for the grants that follow do
    -- not set it until the clock has caught up.
    local t = redis.call('TIME')
    local c = redis.call('INCR', KEYS[2])
    local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
    local start = tonumber(ARGV[7] or '')
    if start and start <= now and start > now - 200000 then
      now = start
    else
      now = now - now % 100000
    end
    if c < now then
      return startCounter(now)
    end
    return c
  end
  return 0
end
local holds, rest = holdsOf(redis.call('GET', KEYS[1]), ARGV[3])
if holds and holds ~= '' then
  local id = string.sub(ARGV[1], #ARGV[3] + 1, string.find(ARGV[1], '\0', #ARGV[3] + 1, true) - 1)
  if findHold(holds, id) then
    return redis.error_reply('DUPLICATE this server granted this acquisition already, through another node address')
  end
  local _, n = string.gsub(holds, ' ', '')
  -- A re-entry only ever lengthens the hold: another Lock with this token
  -- counts on the key living as long as it was told, so the TTL becomes
  -- max(PTTL, ARGV[2]); a key without expiry keeps none.
  local left = redis.call('PTTL', KEYS[1])
  redis.call('SET', KEYS[1], ARGV[3] .. holds .. ' ' .. id .. rest, 'KEEPTTL')
  if left >= 0 and left < tonumber(ARGV[2]) then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
  end
  if fenced then
    -- Same holder: the fence the counter stands at, which only ever goes
    -- up (fence.lua), so it is at least every fence handed out for this
    -- key before. A counter that expired while the key was held (kept by
    -- Extend past the counter's lifetime) starts again from the exact
    -- clock, as for a new holder: above every fence handed out before,
    -- under the same assumption as a fresh start. Where the counter went
    -- past the outer lock's fence (a late grant of its own acquisition),
    -- the re-entry's fence is higher than the outer's and is written back.
    local c = redis.call('GET', KEYS[2])
    if c then
      return tonumber(c)
    end
    local t = redis.call('TIME')
    return startCounter(tonumber(t[1]) * 1000000 + tonumber(t[2]))
  end
  return n + 2
end
return -(redis.call('PTTL', KEYS[1]) + 2)
