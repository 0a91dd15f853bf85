-- Compare-and-delete: delete the lock only if our token holds it.
--
-- KEYS[1]  the lock key
-- ARGV[1]  our token .. "\0" (the value's prefix)
--
-- Returns 1 when deleted, 0 when the key is gone, -1 when another token
-- holds it.
local v = redis.call('GET', KEYS[1])
if not v then
  return 0
end
if string.sub(v, 1, #ARGV[1]) ~= ARGV[1] then
  return -1
end
redis.call('DEL', KEYS[1])
return 1
