-- Compare-and-delete: take our hold off the lock, only if our token holds
-- it with our hold id (see holds.lua). The last hold deletes the key (or,
-- with a cooldown, keeps it for that long, with no hold left, so that
-- nobody obtains it meanwhile) and tells waiters on the key's release
-- channel. Another hold of the same token stays as it was: the key lives on,
-- for at least the cooldown if one is given.
--
-- KEYS[1]  the lock key
-- ARGV[1]  our token .. "\0" (the value's prefix)
-- ARGV[2]  the release channel, or "" to tell nobody (the undo of a failed
--          acquisition: no lock was held, and waking waiters, the failed
--          client among them, would only start another round of the same)
-- ARGV[3]  cooldown in milliseconds: 0 deletes the key, more keeps it
-- ARGV[4]  our hold id
--
-- Returns 1 when done, 0 when our hold is not on the key (the key is gone,
-- or holds only other holds of our token), -1 when another token holds it.
--[[holds.lua]]
local v = redis.call('GET', KEYS[1])
if not v then
  return 0
end
local holds, rest = holdsOf(v, ARGV[1])
if not holds then
  return -1
end
local s, e = findHold(holds, ARGV[4])
if not s then
  return 0
end
holds = dropHold(holds, s, e)
if holds ~= '' then
  redis.call('SET', KEYS[1], ARGV[1] .. holds .. rest, 'KEEPTTL')
  if ARGV[3] ~= '0' then
    local left = redis.call('PTTL', KEYS[1])
    if left >= 0 and left < tonumber(ARGV[3]) then
      redis.call('PEXPIRE', KEYS[1], ARGV[3])
    end
  end
  return 1
end
if ARGV[3] ~= '0' then
  redis.call('SET', KEYS[1], ARGV[1] .. rest, 'PX', ARGV[3])
  return 1
end
redis.call('DEL', KEYS[1])
if ARGV[2] ~= '' then
  redis.call('PUBLISH', ARGV[2], KEYS[1])
end
return 1
