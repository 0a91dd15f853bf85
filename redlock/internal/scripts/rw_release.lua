-- Release a reader's lease: release.lua on the lease key, pasted unchanged
-- into the function below; a lease that is gone leaves the index, and one
-- that lock-delay keeps keeps the index alive as long as itself.
--
-- KEYS[1]  the lease key
-- KEYS[2]  the index of leases
-- ARGV     release.lua's ARGV
--
-- Returns release.lua's reply.
local release = function(KEYS, ARGV)
--[[release.lua]]
end
local r = release({KEYS[1]}, ARGV)
local left = redis.call('PTTL', KEYS[1])
if left == -2 then
  redis.call('SREM', KEYS[2], KEYS[1])
elseif redis.call('PTTL', KEYS[2]) < left then
  redis.call('PEXPIRE', KEYS[2], left)
end
return r
