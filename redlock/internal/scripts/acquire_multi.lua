-- Take several lock keys at once, all or none, in one atomic step: the
-- acquisition of a multi-key lock on one node. The library pastes the
-- unchanged body of acquire.lua into the function below (multi.go), so
-- every key is taken as a single-key acquisition takes it (the restart
-- guard included).
--
-- KEYS[1..n]   the lock keys
-- KEYS[n+1]    the node's memory marker      (guard mode only)
-- KEYS[n+2]    the node's quarantine key     (guard mode only)
-- ARGV[1]      n
-- ARGV[2..]    acquire.lua's ARGV (a multi-key lock has no fencing token)
--
-- Returns 0 when every key was free and is now ours. When any key is held
-- (by any token: a multi-key lock is never a re-entry): -(PTTL + 2) of the
-- held key that lives longest (-1: one has no expiry), so the caller can
-- sleep until all may be free; nothing is written. With the restart guard
-- on, a node that abstains answers acquire.lua's ABSTAIN error, and nothing
-- is written either.
local acquire = function(KEYS, ARGV)
--[[acquire.lua]]
end
local n = tonumber(ARGV[1])
local longest = nil
for i = 1, n do
  local p = redis.call('PTTL', KEYS[i])
  if p ~= -2 then
    if p == -1 or longest == -1 then
      longest = -1
    else
      longest = math.max(longest or 0, p)
    end
  end
end
if longest then
  return -(longest + 2)
end
local args = {unpack(ARGV, 2)}
for i = 1, n do
  -- KEYS[2], the fencing counter, is never touched without fencing.
  local r = acquire({KEYS[i], KEYS[i], KEYS[n + 1], KEYS[n + 2]}, args)
  if type(r) == 'table' or r < 0 then
    -- Refused: the guard answers before its first SET, so only a key
    -- that an earlier call of this loop set can be here; take it back.
    for j = 1, i - 1 do
      redis.call('DEL', KEYS[j])
    end
    return r
  end
  -- The guard's verdict holds for the whole step: read INFO once.
  args[5] = '0'
end
return 0
