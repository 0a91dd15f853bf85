-- Compare-and-pexpire for many keys in one call (KeepAlive's batched
-- extensions): extend.lua for each key, with each key's own token.
--
-- KEYS[i]    a lock key
-- ARGV[1]    the new TTL in milliseconds (a longer one is kept)
-- ARGV[1+i]  the owner's token .. "\0" (the value's prefix) of KEYS[i]
--
-- Returns one character per key, in order: "1" extended (or already
-- longer), "0" the key is gone, "-" another token holds it (or the key is
-- not a string: not ours either). One bad key must not fail the others'
-- extension, hence pcall.
local ttl = tonumber(ARGV[1])
local out = {}
for i, key in ipairs(KEYS) do
  local p = ARGV[i + 1]
  local v = redis.pcall('GET', key)
  if not v then
    out[i] = '0'
  elseif type(v) ~= 'string' or string.sub(v, 1, #p) ~= p then
    out[i] = '-'
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
