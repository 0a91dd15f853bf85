-- Take the lock if it is free: SET NX PX, atomically.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the value: token .. "\0" .. holds .. "\0" .. metadata
-- ARGV[2]  TTL in milliseconds
--
-- Returns 0 when granted. When the key is taken, returns -(PTTL + 2) of the
-- current holder, so the caller can sleep until it may expire: -1 means the
-- key has no expiry, -2 that it expires within the millisecond.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 0
end
return -(redis.call('PTTL', KEYS[1]) + 2)
