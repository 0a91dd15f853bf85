-- Release, extend or read the TTL of a multi-key lock on one node: the
-- single-key script, pasted unchanged into the functions below (multi.go),
-- run for every key in one atomic step.
--
-- KEYS        the lock keys
-- ARGV[1]     "release", "extend" or "pttl"
-- ARGV[2..]   the single-key script's ARGV; for release, ARGV[3] is the
--             prefix of the keys' release channels ("" to tell nobody)
-- ARGV[#ARGV-1], ARGV[#ARGV]  the call's nonce and how long to keep it
--             (once.lua, put in front of this script: checked once per
--             call, not per key)
--
-- Returns, for release and extend, 1 when every key was ours (and the
-- action done), else -1 when another token holds any of them, else 0 (a key
-- is gone); the keys that were ours are released or extended either way.
-- For pttl: -3 when another token holds a key, else -2 when a key is gone,
-- else the shortest PTTL of the keys (-1 when none expires).
local release = function(KEYS, ARGV)
--[[release.lua]]
end
local extend = function(KEYS, ARGV)
--[[extend.lua]]
end
local pttl = function(KEYS, ARGV)
--[[pttl.lua]]
end
local op = ARGV[1]
local args = {unpack(ARGV, 2)}
local out = nil
for i = 1, #KEYS do
  local r
  if op == 'release' then
    local channel = ''
    if args[2] ~= '' then
      channel = args[2] .. KEYS[i]
    end
    r = release({KEYS[i]}, {args[1], channel, args[3], args[4]})
  elseif op == 'extend' then
    r = extend({KEYS[i]}, args)
  else
    r = pttl({KEYS[i]}, args)
  end
  if out == nil then
    out = r
  elseif op ~= 'pttl' then
    out = math.min(out, r)
  elseif r == -3 or out == -3 then
    out = -3
  elseif r == -2 or out == -2 then
    out = -2
  elseif out == -1 or (r >= 0 and r < out) then
    out = r
  end
end
return out
