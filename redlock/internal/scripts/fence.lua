-- Raise a key's fencing counter to at least a value: the write-back that
-- makes every later majority see the new holder's fence.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the key's fencing counter
-- ARGV[1]  the fence
-- ARGV[2]  the counter's lifetime in ms, renewed by every write-back
-- ARGV[3]  the holder's token .. "\0" (the value's prefix)
-- ARGV[4]  the holder's hold id
-- ARGV[#ARGV-1], ARGV[#ARGV]  the call's nonce and how long to keep it
--          (once.lua; the round that the holder waits for counts)
--
-- Returns the counter after the write.
--
-- The counter never goes back: a write-back may reach a node late, behind
-- the holder's release and the next acquisitions of the key (with the same
-- token, too), and must not take the counter below what they were handed.
-- Where the holder's hold is on the key, the fence is also written into
-- that hold's entry (holds.lua): the fence its holder knows, which Leader
-- reports as the term. Only this hold's own write-back writes there.
--
-- Grants renew the counter's expiry only when they start it again from
-- this server's clock (see acquire.lua), which a counter ahead of that
-- clock (the fence of a node whose clock is ahead) is not, until the clock
-- has caught up: such a counter gets its lifetime plus its lead. The lead
-- counts up to one lifetime: a clock further behind the fences than that
-- is outside the guarantee anyway (see acquire.lua).
--[[holds.lua]]
local function expiry(count)
  local t = redis.call('TIME')
  local lead = (count - (tonumber(t[1]) * 1000000 + tonumber(t[2]))) / 1000
  local ms = tonumber(ARGV[2])
  if lead > 0 then
    ms = ms + math.ceil(math.min(lead, ms))
  end
  return string.format('%d', ms)
end
local f = tonumber(ARGV[1])
local v = redis.call('GET', KEYS[1])
local holds, rest = holdsOf(v, ARGV[3])
if holds then
  local s, e = findHold(holds, ARGV[4])
  if s then
    local entry = ARGV[4] .. ':' .. ARGV[1]
    if string.sub(holds, s, e) ~= entry then
      redis.call('SET', KEYS[1], ARGV[3] .. string.sub(holds, 1, s - 1) .. entry .. string.sub(holds, e + 1) .. rest, 'KEEPTTL')
    end
  end
end
local c = tonumber(redis.call('GET', KEYS[2]) or '0')
if c < f then
  redis.call('SET', KEYS[2], ARGV[1], 'PX', expiry(f))
  return f
end
redis.call('PEXPIRE', KEYS[2], expiry(c))
return c
