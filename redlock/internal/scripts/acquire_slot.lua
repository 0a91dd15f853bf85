-- Take one permit of a semaphore on one node: the first free slot, in the
-- order the client sends, taken as a single-key acquisition takes its key.
-- The library pastes the unchanged body of acquire.lua into the function
-- below (semaphore.go), so every slot is taken with its guard, fencing and
-- lock-delay.
--
-- KEYS[1]      the semaphore's size key
-- KEYS[2]      the node's memory marker         (guard mode only)
-- KEYS[3]      the node's quarantine key        (guard mode only)
-- KEYS[4..n+3] the slot keys, in the order to try them
-- KEYS[n+4..]  their fencing counters           (fencing only)
-- ARGV[1]      n, the semaphore's size
-- ARGV[2]      the semaphore's name, quoted, for the client's messages
-- ARGV[3..]    acquire.lua's ARGV (value, TTL, prefix, fenced, guard,
--              counter lifetime, counter start)
--
-- Returns, when granted: the position j (0-based) of the slot taken in
-- KEYS, or, with fencing, the fence followed by j in three digits, as a
-- string (the number is above what Lua's doubles hold exactly). When every
-- slot is held: -(PTTL + 2) of the slot that expires first (-1: none
-- expires); nothing is written. A size key that says another size: the
-- error SIZE followed by that size, nothing written. With the restart guard, a node that
-- abstains answers acquire.lua's ABSTAIN error, nothing written.
local acquire = function(KEYS, ARGV)
--[[acquire.lua]]
end
local n = tonumber(ARGV[1])
local size = redis.call('GET', KEYS[1])
if size and size ~= ARGV[1] then
  return redis.error_reply('SIZE ' .. size)
end
local args = {unpack(ARGV, 3)}
local fenced = args[4] == '1'
local first = nil
for j = 1, n do
  local slot = KEYS[3 + j]
  local counter = slot
  if fenced then
    counter = KEYS[3 + n + j]
  end
  local r = acquire({slot, counter, KEYS[2], KEYS[3]}, args)
  if type(r) == 'table' then
    -- An error (ABSTAIN, DUPLICATE): answered before any write.
    return r
  end
  if r >= 0 then
    -- The size lives at least as long as the slot: users that disagree
    -- on it see it while any permit lives, and it never outlives them all
    -- by more than a TTL.
    local left = redis.call('PTTL', slot)
    if redis.call('PTTL', KEYS[1]) < left then
      redis.call('SET', KEYS[1], ARGV[1], 'PX', left)
    end
    if fenced then
      return string.format('%.0f%03d', r, j - 1)
    end
    return j - 1
  end
  local p = -r - 2
  if first == nil or first == -1 or (p ~= -1 and p < first) then
    first = p
  end
  -- The guard's verdict holds for the whole step: read INFO once.
  args[5] = '0'
end
return -((first or -1) + 2)
