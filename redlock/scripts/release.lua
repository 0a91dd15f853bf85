-- Compare-and-delete: give up one hold of the lock, only if our token holds
-- it. The last hold deletes the key (or, with a cooldown, keeps it for that
-- long) and tells waiters on the key's release channel.
--
-- KEYS[1]  the lock key
-- ARGV[1]  our token .. "\0" (the value's prefix)
-- ARGV[2]  the release channel, or "" to tell nobody (the undo of a failed
--          acquisition: no lock was held, and waking waiters, the failed
--          client among them, would only start another round of the same)
-- ARGV[3]  cooldown in milliseconds: 0 deletes the key, more keeps it
--
-- Returns 1 when done, 0 when the key is gone, -1 when another token holds
-- it.
local v = redis.call('GET', KEYS[1])
if not v then
  return 0
end
if string.sub(v, 1, #ARGV[1]) ~= ARGV[1] then
  return -1
end
local rest = string.sub(v, #ARGV[1] + 1)
local i = string.find(rest, '\0', 1, true)
local holds = i and tonumber(string.sub(rest, 1, i - 1))
if holds and holds > 1 then
  redis.call('SET', KEYS[1], ARGV[1] .. (holds - 1) .. string.sub(rest, i), 'KEEPTTL')
  return 1
end
if ARGV[3] ~= '0' then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return 1
end
redis.call('DEL', KEYS[1])
if ARGV[2] ~= '' then
  redis.call('PUBLISH', ARGV[2], KEYS[1])
end
return 1
