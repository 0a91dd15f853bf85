-- The remaining TTL of our lock on this node.
--
-- KEYS[1]  the lock key
-- ARGV[1]  our token .. "\0" (the value's prefix)
--
-- Returns the PTTL in milliseconds (-1: no expiry) when our token holds the
-- key, -2 when the key is gone, -3 when another token holds it.
local v = redis.call('GET', KEYS[1])
if not v then
  return -2
end
if string.sub(v, 1, #ARGV[1]) ~= ARGV[1] then
  return -3
end
return redis.call('PTTL', KEYS[1])
