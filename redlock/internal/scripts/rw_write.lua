-- Take the writer key of a read-write lock on one node: acquire.lua on
-- the key, unless a reader's lease listed in the index still exists
-- (lock-delay's cooldown included). The library pastes the unchanged body
-- of acquire.lua into the function below (rwmutex.go).
--
-- KEYS[1]  the writer key (the read-write lock's name)
-- KEYS[2]  its fencing counter
-- KEYS[3]  the node's memory marker
-- KEYS[4]  the node's quarantine key
-- KEYS[5]  the index of leases
-- KEYS[6]  the waiting-writer mark
-- ARGV[1..7] acquire.lua's ARGV, all seven
-- ARGV[8]  a waiting writer's margin in ms ("0": a single attempt, which
--          sets no mark)
--
-- Returns acquire.lua's reply, and deletes the mark when granted. While a
-- lease exists: -(PTTL + 2) of the lease that lives longest (-1: one has
-- no expiry), nothing written but, for a waiting writer, the mark, which
-- then lives as long as that lease and the margin more, and keeps new
-- readers out (rw_read.lua): a writer is not starved by readers that
-- overlap. The writer retries when the last lease goes (its release wakes
-- it; its expiry is the reply's), within the margin, and marks again if
-- it is refused again.
local acquire = function(KEYS, ARGV)
--[[acquire.lua]]
end
local longest = -2
for _, k in ipairs(redis.call('SMEMBERS', KEYS[5])) do
  local left = redis.call('PTTL', k)
  if left == -2 then
    redis.call('SREM', KEYS[5], k)
  elseif left == -1 or (left > longest and longest ~= -1) then
    longest = left
  end
end
if longest ~= -2 then
  local ms = tonumber(ARGV[8])
  if ms > 0 then
    if longest > 0 then
      ms = ms + longest
    end
    if redis.call('PTTL', KEYS[6]) < ms then
      redis.call('SET', KEYS[6], '1', 'PX', ms)
    end
  end
  return -(longest + 2)
end
local r = acquire({KEYS[1], KEYS[2], KEYS[3], KEYS[4]}, {unpack(ARGV, 1, 7)})
if type(r) == 'number' and r >= 0 then
  redis.call('DEL', KEYS[6])
end
return r
