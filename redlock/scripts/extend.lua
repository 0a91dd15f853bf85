-- Compare-and-pexpire: reset the TTL only where our token still holds the
-- lock. A key that is gone is not recreated: someone else may have taken the
-- lock meanwhile on other nodes.
--
-- KEYS[1]  the lock key
-- ARGV[1]  our token .. "\0" (the value's prefix)
-- ARGV[2]  the new TTL in milliseconds
--
-- Returns 1 when extended, 0 when the key is gone, -1 when another token
-- holds it.
local v = redis.call('GET', KEYS[1])
if not v then
  return 0
end
if string.sub(v, 1, #ARGV[1]) ~= ARGV[1] then
  return -1
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
