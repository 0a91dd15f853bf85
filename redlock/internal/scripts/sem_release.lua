-- Release a semaphore's permit, or undo an attempt on its slots:
-- release.lua on each of the first m slot keys, pasted unchanged into the
-- function below; then, when the size key says the caller's size, it is
-- made to live exactly as long as the slot that lives longest (a cooldown
-- included), and is deleted when no slot lives. (Only then are the
-- caller's slots all that the size key covers; a caller of another size
-- leaves it alone.) A size key never outlives the permits that use it by
-- more than this step, so that a user of another size is refused only
-- while a permit of this size lives (or an attempt holds a slot), and
-- never outlived by one, so that a permit's size is always seen.
--
-- KEYS[1]        the semaphore's size key
-- KEYS[2..m+1]   the slot keys to take our hold off
-- KEYS[m+2..]    the semaphore's other slot keys (read, not written)
-- ARGV[1..4]     release.lua's ARGV; the channel is the semaphore's
-- ARGV[5]        m
-- ARGV[6]        the caller's size: KEYS[2..] are all of its slots
--
-- Returns release.lua's reply for the first slot key when m is 1; for
-- more, 1 when our hold was on any of them, else 0.
local release = function(KEYS, ARGV)
--[[release.lua]]
end
local m = tonumber(ARGV[5])
local args = {ARGV[1], ARGV[2], ARGV[3], ARGV[4]}
local out = 0
for j = 2, m + 1 do
  local r = release({KEYS[j]}, args)
  if m == 1 or r == 1 then
    out = r
  end
end
if redis.call('GET', KEYS[1]) ~= ARGV[6] then
  return out
end
local longest = -2
for j = 2, #KEYS do
  local left = redis.call('PTTL', KEYS[j])
  if left == -1 or (left > longest and longest ~= -1) then
    longest = left
  end
end
if longest == -2 then
  redis.call('DEL', KEYS[1])
elseif longest == -1 then
  redis.call('PERSIST', KEYS[1])
elseif redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('PEXPIRE', KEYS[1], longest)
end
return out
