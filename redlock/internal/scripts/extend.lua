-- Compare-and-pexpire: raise the TTL to at least ARGV[2], only where our
-- token still holds the lock with our hold id (see holds.lua). A key that
-- is gone is not recreated: someone else may have taken the lock meanwhile
-- on other nodes.
--
-- KEYS[1]  the lock key
-- ARGV[1]  our token .. "\0" (the value's prefix)
-- ARGV[2]  the new TTL in milliseconds (a longer one is kept)
-- ARGV[3]  our hold id
--
-- Returns 1 when extended (or already longer), 0 when our hold is not on
-- the key, -1 when another token holds it.
--[[holds.lua]]
local v = redis.call('GET', KEYS[1])
if not v then
  return 0
end
local holds = holdsOf(v, ARGV[1])
if not holds then
  return -1
end
if not findHold(holds, ARGV[3]) then
  return 0
end
-- Only ever lengthen: another hold of our token (a re-entry, a reclaim)
-- may count on a longer TTL than ours. A key without expiry keeps none.
local left = redis.call('PTTL', KEYS[1])
if left >= 0 and left < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 1
