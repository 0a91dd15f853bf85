-- Take the lock if it is free (SET NX PX, atomically), or take one more
-- hold on it if our token already holds it (re-entry).
--
-- KEYS[1]  the lock key
-- KEYS[2]  the key's fencing counter        (fencing or guard mode only)
-- KEYS[3]  the node's memory marker          (fencing or guard mode only)
-- KEYS[4]  the node's quarantine key         (fencing or guard mode only)
-- ARGV[1]  the value: token .. "\0" .. holds .. "\0" .. metadata
-- ARGV[2]  TTL in milliseconds
-- ARGV[3]  token .. "\0" (the value's prefix)
-- ARGV[4]  "1" to return a fencing token      (optional)
-- ARGV[5]  restart guard: the maximum TTL in ms, "0" for off (optional)
--
-- Returns, when granted: the fencing token in fencing mode (the counter,
-- raised in this same step for a new holder), else 0 for a new holder
-- and n >= 2 for a re-entry with n holds. When another token holds the key:
-- -(PTTL + 2) of that holder, so the caller can sleep until it may expire
-- (-1: the key has no expiry). With the restart guard on, a node that lost
-- its memory answers an ABSTAIN error until the maximum TTL has passed.
local guard = tonumber(ARGV[5] or '0')
if guard > 0 then
  -- The marker has no expiry: if it is missing, this node restarted
  -- without persistence or was flushed, and forgot the locks it granted.
  -- It stays out of every vote until any such lock has surely expired.
  if redis.call('EXISTS', KEYS[3]) == 0 then
    redis.call('SET', KEYS[4], '1', 'PX', guard, 'NX')
    redis.call('SET', KEYS[3], '1')
  end
  local left = redis.call('PTTL', KEYS[4])
  if left > 0 then
    return redis.error_reply('ABSTAIN node lost its memory, abstains for ' .. left .. ' ms more')
  end
end
local fenced = ARGV[4] == '1'
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if fenced then
    -- The counter becomes max(counter + 1, this server's clock in
    -- microseconds). It grows by one per holder, far slower than the
    -- clock, so fences follow time: a node that lost its counter (restart
    -- without persistence) starts again from its clock, above every fence
    -- handed out before, as long as the servers' clocks roughly agree.
    -- The clock value is kept as an exact decimal string: Lua numbers are
    -- doubles and print such values rounded.
    local t = redis.call('TIME')
    local now = t[1] .. string.format('%06d', tonumber(t[2]))
    local c = redis.call('INCR', KEYS[2])
    if c < tonumber(now) then
      redis.call('SET', KEYS[2], now)
      return tonumber(now)
    end
    return c
  end
  return 0
end
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, #ARGV[3]) == ARGV[3] then
  local rest = string.sub(v, #ARGV[3] + 1)
  local i = string.find(rest, '\0', 1, true)
  local holds = i and tonumber(string.sub(rest, 1, i - 1))
  if holds then
    holds = holds + 1
    -- A re-entry only ever lengthens the hold: another Lock with this token
    -- counts on the key living as long as it was told, so the TTL becomes
    -- max(PTTL, ARGV[2]); a key without expiry keeps none.
    local left = redis.call('PTTL', KEYS[1])
    redis.call('SET', KEYS[1], ARGV[3] .. holds .. string.sub(rest, i), 'KEEPTTL')
    if left >= 0 and left < tonumber(ARGV[2]) then
      redis.call('PEXPIRE', KEYS[1], ARGV[2])
    end
    if fenced then
      -- Same holder: same fence.
      return tonumber(redis.call('GET', KEYS[2]) or '0')
    end
    return holds
  end
end
return -(redis.call('PTTL', KEYS[1]) + 2)
