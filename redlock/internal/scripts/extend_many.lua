-- Compare-and-pexpire for many keys in one call (KeepAlive's batched
-- extensions): extend.lua for each key, with each key's own token and hold.
--
-- KEYS[i]       a lock key
-- ARGV[1]       the new TTL in milliseconds (a longer one is kept)
-- ARGV[2i]      the owner's token .. "\0" (the value's prefix) of KEYS[i]
-- ARGV[2i+1]    the owner's hold id on KEYS[i]
-- ARGV[#ARGV-1] the call's nonce, ARGV[#ARGV] how long to keep it (once.lua)
--
-- Returns one character per key, in order: "1" extended (or already
-- longer), "0" our hold is not on the key, "-" another token holds it (or
-- the key is not a string: not ours either). One bad key must not fail the
-- others' extension, hence pcall.
--[[holds.lua]]
local ttl = tonumber(ARGV[1])
local out = {}
for i, key in ipairs(KEYS) do
  local v = redis.pcall('GET', key)
  local holds = type(v) == 'string' and holdsOf(v, ARGV[2 * i])
  if not v then
    out[i] = '0'
  elseif not holds then
    out[i] = '-'
  elseif not findHold(holds, ARGV[2 * i + 1]) then
    out[i] = '0'
  else
    -- Only ever lengthen, as extend.lua.
    local left = redis.call('PTTL', key)
    if left >= 0 and left < ttl then
      redis.call('PEXPIRE', key, ttl)
    end
    out[i] = '1'
  end
end
return table.concat(out)
