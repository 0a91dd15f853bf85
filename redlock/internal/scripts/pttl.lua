-- The remaining TTL of our lock on this node.
--
-- KEYS[1]  the lock key
-- ARGV[1]  our token .. "\0" (the value's prefix)
-- ARGV[2]  our hold id
--
-- Returns the PTTL in milliseconds (-1: no expiry) when our token holds the
-- key with our hold id (see holds.lua), -2 when our hold is not on the key,
-- -3 when another token holds it.
--[[holds.lua]]
local v = redis.call('GET', KEYS[1])
if not v then
  return -2
end
local holds = holdsOf(v, ARGV[1])
if not holds then
  return -3
end
if not findHold(holds, ARGV[2]) then
  return -2
end
return redis.call('PTTL', KEYS[1])
