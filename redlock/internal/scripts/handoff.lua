-- Handoff: the release of one owner and the acquisition of the next, as one
-- atomic step on the node. The library pastes the unchanged bodies of
-- release.lua and acquire.lua into the two functions below (scripts.go), so
-- on each node the key passes from the old token to the new one exactly as
-- if the release had been followed at once by the acquisition.
--
-- KEYS        acquire.lua's KEYS (KEYS[1] is the lock key)
-- ARGV[1..4]  release.lua's ARGV, for the owner who lets go; ARGV[2], the
--             release channel, is told only if the key ends up free
-- ARGV[5..]   acquire.lua's ARGV, for the next owner
--
-- Returns {release's reply, acquire's reply}; when the acquisition is
-- refused with an error (the restart guard's ABSTAIN), its message instead.
local release = function(KEYS, ARGV)
--[[release.lua]]
end
local acquire = function(KEYS, ARGV)
--[[acquire.lua]]
end
-- The release announces nothing: the key is meant to pass straight on.
local r = release({KEYS[1]}, {ARGV[1], '', ARGV[3], ARGV[4]})
local a = acquire(KEYS, {unpack(ARGV, 5)})
-- If it did not (the acquisition was refused), the old owner's release
-- freed the key: announce it as a release does, or waiters elsewhere
-- would sleep until their timers.
if r == 1 and ARGV[2] ~= '' and redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('PUBLISH', ARGV[2], KEYS[1])
end
if type(a) == 'table' then
  return {r, a['err']}
end
return {r, a}
