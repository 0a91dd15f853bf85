-- Raise a key's fencing counter to at least a value: the write-back that
-- makes every later majority see the new holder's fence.
--
-- KEYS[1]  the lock key (unused: it keeps this call in the lock's order)
-- KEYS[2]  the key's fencing counter
-- ARGV[1]  the fence
--
-- Returns the counter after the write.
local c = tonumber(redis.call('GET', KEYS[2]) or '0')
local f = tonumber(ARGV[1])
if c < f then
  redis.call('SET', KEYS[2], ARGV[1])
  return f
end
return c
