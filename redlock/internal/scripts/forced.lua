-- Whether a ForceRelease removed our hold: read the notes force.lua left
-- for the keys of a lock that found them gone.
--
-- KEYS[1..n]  the notes of the lock's keys (wire.ForcedKey)
-- ARGV[1]     our token .. "\0" (the value's prefix)
-- ARGV[2]     our hold id
--
-- Returns 1 when a note holds our hold, else 0.
--[[holds.lua]]
for _, k in ipairs(KEYS) do
  local holds = holdsOf(redis.call('GET', k), ARGV[1])
  if holds and findHold(holds, ARGV[2]) then
    return 1
  end
end
return 0
