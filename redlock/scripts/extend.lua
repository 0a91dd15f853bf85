-- Compare-and-pexpire: raise the TTL to at least ARGV[2], only where our
-- token still holds the lock. A key that is gone is not recreated: someone
-- else may have taken the lock meanwhile on other nodes.
--
-- KEYS[1]  the lock key
-- ARGV[1]  our token .. "\0" (the value's prefix)
-- ARGV[2]  the new TTL in milliseconds (a longer one is kept)
--
-- Returns 1 when extended (or already longer), 0 when the key is gone, -1
-- when another token holds it.
local v = redis.call('GET', KEYS[1])
if not v then
  return 0
end
if string.sub(v, 1, #ARGV[1]) ~= ARGV[1] then
  return -1
end
-- Only ever lengthen: a Lock sharing our token (a re-entry, a reclaim) may
-- count on a longer TTL than ours. A key without expiry keeps none.
local left = redis.call('PTTL', KEYS[1])
if left >= 0 and left < tonumber(ARGV[2]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 1
