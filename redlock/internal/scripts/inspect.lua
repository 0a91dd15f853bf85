-- What a node knows of a lock: its value, remaining TTL and fencing counter.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the key's fencing counter
-- KEYS[3]  an index of leases (a read-write lock's; optional)
-- ARGV[1], ARGV[2]  the call's nonce and how long to keep it (once.lua;
--          optional)
--
-- Returns {value, PTTL, fence} when the key exists, {false, -2, fence}
-- otherwise; fence is 0 when there is no counter. With an index, its
-- members follow.
local f = tonumber(redis.call('GET', KEYS[2]) or '0')
local r = {false, -2, f}
local v = redis.call('GET', KEYS[1])
if v then
  r = {v, redis.call('PTTL', KEYS[1]), f}
end
if KEYS[3] then
  r[4] = redis.call('SMEMBERS', KEYS[3])
end
return r
