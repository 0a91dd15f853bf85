-- Delete a lock whoever holds it, and tell waiters.
--
-- KEYS[1]  the lock key
-- ARGV[1]  the release channel
--
-- Returns 1 when a key was deleted, 0 when there was none.
local n = redis.call('DEL', KEYS[1])
if n > 0 then
  redis.call('PUBLISH', ARGV[1], KEYS[1])
end
return n
