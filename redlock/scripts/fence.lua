-- Raise a key's fencing counter to at least a value: the write-back that
-- makes every later majority see the new holder's fence.
--
-- KEYS[1]  the lock key
-- KEYS[2]  the key's fencing counter
-- ARGV[1]  the fence
-- ARGV[2]  the counter's lifetime in ms, renewed by every write-back
-- ARGV[3]  the holder's token .. "\0" (the value's prefix; optional)
--
-- Returns the counter after the write.
--
-- Grants renew the counter's expiry only when they start it again from
-- this server's clock (see acquire.lua), which a counter ahead of that
-- clock (the fence of a node whose clock is ahead) is not, until the clock
-- has caught up: such a counter gets its lifetime plus its lead. The lead
-- counts up to one lifetime: a clock further behind the fences than that
-- is outside the guarantee anyway (see acquire.lua).
local function expiry(count)
  local t = redis.call('TIME')
  local lead = (count - (tonumber(t[1]) * 1000000 + tonumber(t[2]))) / 1000
  local ms = tonumber(ARGV[2])
  if lead > 0 then
    ms = ms + math.ceil(math.min(lead, ms))
  end
  return string.format('%d', ms)
end
local v = ARGV[3] and redis.call('GET', KEYS[1])
if v and string.sub(v, 1, #ARGV[3]) == ARGV[3] then
  -- The holder's own node: its counter becomes the fence exactly, so that
  -- a re-entry reads the holder's fence back from it. A grant that arrived
  -- here after the decision may have counted past the fence, but that count
  -- was never handed out, and every fence handed out before is below ours.
  redis.call('SET', KEYS[2], ARGV[1], 'PX', expiry(tonumber(ARGV[1])))
  return tonumber(ARGV[1])
end
local c = tonumber(redis.call('GET', KEYS[2]) or '0')
local f = tonumber(ARGV[1])
if c < f then
  redis.call('SET', KEYS[2], ARGV[1], 'PX', expiry(f))
  return f
end
redis.call('PEXPIRE', KEYS[2], expiry(c))
return c
