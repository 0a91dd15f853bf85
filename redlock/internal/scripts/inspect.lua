-- What a node knows of a lock: its value, remaining TTL and fencing counter.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the key's fencing counter
-- ARGV[1], ARGV[2]  the call's nonce and how long to keep it (once.lua;
--          optional)
--
-- Returns {value, PTTL, fence} when the key exists, {false, -2, fence}
-- otherwise; fence is 0 when there is no counter.
local f = tonumber(redis.call('GET', KEYS[2]) or '0')
local v = redis.call('GET', KEYS[1])
if not v then
  return {false, -2, f}
end
return {v, redis.call('PTTL', KEYS[1]), f}
