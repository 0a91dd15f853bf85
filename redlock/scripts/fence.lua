-- Raise a key's fencing counter to at least a value: the write-back that
-- makes every later majority see the new holder's fence.
--
-- KEYS[1]  the lock key (unused: it keeps this call in the lock's order)
-- KEYS[2]  the key's fencing counter
-- ARGV[1]  the fence
-- ARGV[2]  the counter's lifetime in ms, renewed by every write-back
--
-- Returns the counter after the write.
local c = tonumber(redis.call('GET', KEYS[2]) or '0')
local f = tonumber(ARGV[1])
if c < f then
  redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
  return f
end
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return c
