-- The restart guard as a Redis Function library (FUNCTION LOAD, FCALL):
-- the guarded acquisitions, each the unchanged body of its script
-- (acquire.lua, acquire_multi.lua, handoff.lua, a semaphore's
-- acquire_slot.lua, a read-write lock's rw_read.lua and rw_write.lua,
-- pasted by scripts.go) behind
-- one check that keeps what it learnt from INFO in locals of the library.
-- The library's name carries a hash of its source (scripts.go), so that
-- versions coexist on a server and a name always means this source.
--
-- Why the locals may stand for INFO read at every call (docs/safety.md,
-- "How the check runs"): they belong to the server process, not to a
-- connection or a client; they start empty whenever the library is
-- created (a process start, which also gives a new run_id; FUNCTION LOAD
-- REPLACE, FLUSH or RESTORE; a replica's full sync), and a process never
-- changes its run_id. So the run_id cached here is always the server's own.
-- The count of evicted keys is read again (INFO stats) at the first call
-- that finds the last reading 1 ms old or more, and the maxmemory-policy
-- (INFO memory, the dearest section) 100 ms: a count that grew ends the
-- stamp as before, and a node that may evict abstains.
local run        -- this process's run_id, read once
local evicted    -- evicted_keys at the last reading
local evicting   -- the maxmemory-policy at the last reading, if it may evict
local statsAt, memoryAt  -- when (server clock, ms) they were last read
local statsMs, memoryMs = 1, 100
-- passed is the stamp of the last check that let this node vote. That
-- check also wrote it to the marker's key with ':passed' appended, with an
-- expiry of statsMs: while that key holds passed, the check needs none of
-- TIME, INFO, the marker or the quarantine (one GET, not TIME, GET and
-- PTTL: most of what the check costs). The key lives in the data, so a
-- flush takes it away with the marker; it expires by the server's clock,
-- so the readings it stands for are at most one millisecond older than
-- the check's own rule allows; and passed is empty in a library created
-- anew (a restart), so a key from an earlier run never counts.
local passed
-- quarantinedUntil is when (server clock, ms) the quarantine last seen
-- running ends: its key gone before then makes the check read the
-- eviction count at once (see guard).
local quarantinedUntil
-- checkedAt is when (server clock, ms) the check last ran past the passed
-- key: the key is written only where checks come within statsMs of each
-- other, as it would expire unread otherwise (no write per call at a low
-- rate of calls).
local checkedAt

local function field(info, name, pattern)
  local i = string.find(info, '\r\n' .. name .. ':', 1, true)
  return i and string.match(info, pattern, i + #name + 3)
end

local function stale(at, now, ms)
  return not at or now < at or now - at >= ms
end

-- readInfo refreshes the locals that are due from INFO; it returns an
-- error reply when INFO does not say what the guard needs (the locals are
-- then unchanged).
local function readInfo(now)
  local memory = stale(memoryAt, now, memoryMs)
  local info
  if not run then
    info = redis.pcall('INFO', 'server', 'memory', 'stats')
  elseif memory then
    info = redis.pcall('INFO', 'memory', 'stats')
  else
    info = redis.pcall('INFO', 'stats')
  end
  if type(info) ~= 'string' then
    return redis.error_reply('ABSTAIN the restart guard needs Redis 7.0 or later (INFO of several sections)')
  end
  local r = run or field(info, 'run_id', '^%x+')
  local e = field(info, 'evicted_keys', '^%d+')
  local policy = memory and field(info, 'maxmemory_policy', '^[%w-]+')
  if not (r and e and (policy or not memory)) then
    return redis.error_reply('ABSTAIN INFO shows no run_id, maxmemory_policy or evicted_keys')
  end
  run, evicted, statsAt = r, e, now
  if memory then
    evicting, memoryAt = nil, now
    if policy ~= 'noeviction' and field(info, 'maxmemory', '^%d+') ~= '0' then
      evicting = policy
    end
  end
end

-- guard is acquire.lua's restart guard, with marker and quarantine keys and
-- the maximum TTL in ms: nil when the node may vote, else its ABSTAIN
-- error. The marker's stamp is acquire.lua's (run_id and evicted_keys), so
-- that the script and this function agree on a server.
-- vote is guard's check past the passed key, at now (server clock, ms):
-- nil and the stamp when the node may vote, else its ABSTAIN error.
local function vote(now, marker, quarantine, maxTTL)
  if stale(statsAt, now, statsMs) then
    local err = readInfo(now)
    if err then
      return err
    end
  end
  if evicting then
    return redis.error_reply('ABSTAIN maxmemory-policy ' .. evicting .. ' may evict lock keys: set noeviction or maxmemory 0')
  end
  local stamp = run .. ' ' .. evicted
  if redis.call('GET', marker) ~= stamp then
    if redis.call('PTTL', quarantine) < maxTTL + 200 then
      redis.call('SET', quarantine, '1', 'PX', maxTTL + 200)
    end
    redis.call('SET', marker, stamp)
  end
  local left = redis.call('PTTL', quarantine)
  if left > 0 then
    quarantinedUntil = now + left
    return redis.error_reply('ABSTAIN node lost its memory, abstains for ' .. left .. ' ms more')
  end
  return nil, stamp
end

local passedOf, passedKey  -- the marker whose passed key's name is kept
local function guard(marker, quarantine, maxTTL)
  if marker ~= passedOf then
    passedOf, passedKey = marker, marker .. ':passed'
  end
  if passed and redis.pcall('GET', passedKey) == passed then
    return nil
  end
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local close = checkedAt and now >= checkedAt and now - checkedAt <= statsMs
  checkedAt = now
  local err, stamp = vote(now, marker, quarantine, maxTTL)
  if not err and quarantinedUntil and now < quarantinedUntil then
    -- The quarantine's key is gone before its time: deleted on purpose
    -- (Bootstrap's ClearQuarantine), or evicted, as a key with a TTL is
    -- under a volatile-* policy switched on at run time. An eviction
    -- moved the count: read it now, not a millisecond later, or a node
    -- whose quarantine keeps being evicted would vote between readings.
    statsAt = nil
    err, stamp = vote(now, marker, quarantine, maxTTL)
  end
  if err then
    return err
  end
  quarantinedUntil, passed = nil, stamp
  if close then
    -- A user that may not write the key only goes without the saving.
    redis.pcall('SET', passedKey, stamp, 'PX', statsMs)
  end
end

local plainAcquire = function(KEYS, ARGV)
--[[acquire.lua]]
end

-- guarded is acquire.lua behind the guard above, with the guard's keys and
-- maximum TTL (0: no guard), and KEYS and ARGV for acquire.lua with its
-- own guard off.
local function guarded(marker, quarantine, maxTTL, KEYS, ARGV)
  if maxTTL > 0 then
    local err = guard(marker, quarantine, maxTTL)
    if err then
      return err
    end
  end
  return plainAcquire(KEYS, ARGV)
end

-- acquire is acquire.lua with the guard above in place of its own: KEYS
-- and ARGV are acquire.lua's.
local function acquire(KEYS, ARGV)
  local maxTTL = tonumber(ARGV[5] or '0')
  ARGV[5] = '0'
  return guarded(KEYS[3], KEYS[4], maxTTL, KEYS, ARGV)
end

redis.register_function('--[[name]]_acquire', acquire)

-- acquire_lean is acquire for a single-key acquisition that is not
-- fenced, in the lean form of scripts.go's Script.FCall: KEYS[1] the lock
-- key; ARGV[1..3] acquire.lua's value, TTL and prefix; ARGV[4] the
-- maximum TTL. The guard's keys are this server's marker and quarantine,
-- by name (scripts.go's GuardMarker and GuardQuarantine): three keys and
-- three arguments less to send and to parse per call.
redis.register_function('--[[name]]_acquire_lean', function(KEYS, ARGV)
  local maxTTL = tonumber(ARGV[4] or '0')
  ARGV[4] = nil
  return guarded('--[[marker]]', '--[[quarantine]]', maxTTL, KEYS, ARGV)
end)

redis.register_function('--[[name]]_acquire_multi', function(KEYS, ARGV)
--[[acquire_multi.lua]]
end)

redis.register_function('--[[name]]_handoff', function(KEYS, ARGV)
--[[handoff.lua]]
end)

redis.register_function('--[[name]]_acquire_slot', function(KEYS, ARGV)
--[[acquire_slot.lua]]
end)

redis.register_function('--[[name]]_rw_read', function(KEYS, ARGV)
--[[rw_read.lua]]
end)

redis.register_function('--[[name]]_rw_write', function(KEYS, ARGV)
--[[rw_write.lua]]
end)
