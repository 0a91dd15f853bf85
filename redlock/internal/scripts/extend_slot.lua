-- Extend a semaphore's permit: extend.lua on its slot key, pasted
-- unchanged into the function below, and the semaphore's size key made to
-- live at least as long as the slot.
--
-- KEYS[1]  the slot key
-- KEYS[2]  the semaphore's size key
-- ARGV     extend.lua's ARGV, then the call's nonce and how long to keep
--          it (once.lua)
--
-- Returns extend.lua's reply.
local extend = function(KEYS, ARGV)
--[[extend.lua]]
end
local r = extend({KEYS[1]}, ARGV)
if r == 1 then
  local left = redis.call('PTTL', KEYS[1])
  if left > 0 and redis.call('PTTL', KEYS[2]) < left then
    redis.call('PEXPIRE', KEYS[2], left)
  end
end
return r
