-- Delete a lock whoever holds it, and tell waiters: a lock key; or a
-- semaphore's slots and size key; or a read-write lock's writer key, its
-- waiting writer's mark and its index of leases, with every lease the
-- index lists.
--
-- KEYS[1..n]  the keys to delete
-- ARGV[1]     the release channel
-- ARGV[2]     the position in KEYS of an index of leases whose members go
--             too (optional)
--
-- Returns how many keys were deleted (0: none was there).
local n = 0
if ARGV[2] then
  local listed = redis.call('SMEMBERS', KEYS[tonumber(ARGV[2])])
  for _, k in ipairs(listed) do
    n = n + redis.call('DEL', k)
  end
end
n = n + redis.call('DEL', unpack(KEYS))
if n > 0 then
  redis.call('PUBLISH', ARGV[1], KEYS[1])
end
return n
