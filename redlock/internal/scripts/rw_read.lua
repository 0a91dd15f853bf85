-- Take a reader's lease of a read-write lock on one node: the lease is a
-- lock key of its own (token in its name), taken as acquire.lua takes a
-- key, and listed in the lock's index of leases, unless the writer key or
-- the waiting-writer mark exists. The library pastes the unchanged body of
-- acquire.lua into the function below (rwmutex.go), so a lease is taken
-- with the guard, fencing and lock-delay of any lock.
--
-- KEYS[1]  the reader's lease key
-- KEYS[2]  the writer key's fencing counter   (readers raise it too)
-- KEYS[3]  the node's memory marker
-- KEYS[4]  the node's quarantine key
-- KEYS[5]  the writer key (the read-write lock's name)
-- KEYS[6]  the waiting-writer mark
-- KEYS[7]  the index of leases (a set of lease keys)
-- ARGV     acquire.lua's ARGV, all seven
--
-- Returns acquire.lua's reply. While the writer key or the mark exists:
-- -(PTTL + 2) of the one that lives longer (-1: no expiry), nothing
-- written.
local acquire = function(KEYS, ARGV)
--[[acquire.lua]]
end
local longest = -2
for _, k in ipairs({KEYS[5], KEYS[6]}) do
  local left = redis.call('PTTL', k)
  if left == -1 or (left > longest and longest ~= -1) then
    longest = left
  end
end
if longest ~= -2 then
  return -(longest + 2)
end
local r = acquire({KEYS[1], KEYS[2], KEYS[3], KEYS[4]}, ARGV)
if type(r) == 'number' and r >= 0 then
  -- Listed while it lives: the index lives at least as long as every
  -- lease in it (rw_release.lua and extend_slot.lua keep it so).
  redis.call('SADD', KEYS[7], KEYS[1])
  local left = redis.call('PTTL', KEYS[1])
  if redis.call('PTTL', KEYS[7]) < left then
    redis.call('PEXPIRE', KEYS[7], left)
  end
  -- Leases of readers that died stay listed until a writer looks (it
  -- drops them) or the index expires: two random ones are checked here,
  -- so a stream of readers that never meets a writer keeps few.
  for _, k in ipairs(redis.call('SRANDMEMBER', KEYS[7], 2)) do
    if redis.call('EXISTS', k) == 0 then
      redis.call('SREM', KEYS[7], k)
    end
  end
end
return r
