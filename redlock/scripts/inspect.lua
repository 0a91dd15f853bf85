-- What a node knows of a lock: its value and remaining TTL.
--
-- KEYS[1]  the lock key
--
-- Returns {value, PTTL} when the key exists, {false, -2} otherwise.
local v = redis.call('GET', KEYS[1])
if not v then
  return {false, -2}
end
return {v, redis.call('PTTL', KEYS[1])}
