-- Take the lock if it is free (SET NX PX, atomically), or take one more
-- hold on it if our token already holds it (re-entry).
--
-- KEYS[1]  the lock key
-- ARGV[1]  the value: token .. "\0" .. holds .. "\0" .. metadata
-- ARGV[2]  TTL in milliseconds
-- ARGV[3]  token .. "\0" (the value's prefix)
--
-- Returns 0 when granted, n >= 2 when re-entered (n holds now). When another
-- token holds the key, returns -(PTTL + 2) of that holder, so the caller can
-- sleep until it may expire: -1 means the key has no expiry.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 0
end
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, #ARGV[3]) == ARGV[3] then
  local rest = string.sub(v, #ARGV[3] + 1)
  local i = string.find(rest, '\0', 1, true)
  local holds = i and tonumber(string.sub(rest, 1, i - 1))
  if holds then
    holds = holds + 1
    redis.call('SET', KEYS[1], ARGV[3] .. holds .. string.sub(rest, i), 'PX', ARGV[2])
    return holds
  end
end
return -(redis.call('PTTL', KEYS[1]) + 2)
