-- Delete a lock whoever holds it, and tell waiters: a lock key; or a
-- semaphore's slots and size key; or a read-write lock's writer key, its
-- waiting writer's mark and its index of leases, with every lease the
-- index lists. Each deleted key that held a hold (a lock's value) leaves a
-- note under ARGV[2] .. key (wire.ForcedKey) with the removed value, for
-- the hold's remaining TTL plus ARGV[3] ms: its holder, finding the key
-- gone, reads it (forced.lua) and is told it was force-released, not that
-- it expired.
--
-- KEYS[1..n]  the keys to delete
-- ARGV[1]     the release channel
-- ARGV[2]     the prefix of the notes (wire.ForcedPrefix)
-- ARGV[3]     how long a note outlives the hold's TTL, in ms
-- ARGV[4]     the position in KEYS of an index of leases whose members go
--             too (optional)
--
-- Returns how many keys were deleted (0: none was there).
local function forget(k)
  -- pcall: an index of leases is a set, whose GET is an error (TYPE would
  -- need one more command in the library's ACL rule).
  local v = redis.pcall('GET', k)
  if type(v) == 'string' and string.find(v, '\0', 1, true) then
    local left = redis.call('PTTL', k)
    if left < 0 then
      left = 0
    end
    redis.call('SET', ARGV[2] .. k, v, 'PX', left + tonumber(ARGV[3]))
  end
  return redis.call('DEL', k)
end

local n = 0
if ARGV[4] then
  local listed = redis.call('SMEMBERS', KEYS[tonumber(ARGV[4])])
  for _, k in ipairs(listed) do
    n = n + forget(k)
  end
end
for _, k in ipairs(KEYS) do
  n = n + forget(k)
end
if n > 0 then
  redis.call('PUBLISH', ARGV[1], KEYS[1])
end
return n
