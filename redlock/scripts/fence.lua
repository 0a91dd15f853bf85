-- Raise a key's fencing counter to at least a value: the write-back that
-- makes every later majority see the new holder's fence.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the key's fencing counter
-- ARGV[1]  the fence
-- ARGV[2]  the counter's lifetime in ms, renewed by every write-back
-- ARGV[3]  the holder's token .. "\0" (the value's prefix; optional)
--
-- Returns the counter after the write.
local v = ARGV[3] and redis.call('GET', KEYS[1])
if v and string.sub(v, 1, #ARGV[3]) == ARGV[3] then
  -- The holder's own node: its counter becomes the fence exactly, so that
  -- a re-entry reads the holder's fence back from it. A grant that arrived
  -- here after the decision may have counted past the fence, but that count
  -- was never handed out, and every fence handed out before is below ours.
  redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
  return tonumber(ARGV[1])
end
local c = tonumber(redis.call('GET', KEYS[2]) or '0')
local f = tonumber(ARGV[1])
if c < f then
  redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
  return f
end
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return c
