-- Writes a string key only if the fence offered is at or above the fence
-- stored with its value. The value is stored as "<fence>:<payload>".
-- KEYS[1] the key
-- ARGV[1] the fence, decimal, no leading zeros
-- ARGV[2] the payload
-- ARGV[3] the expiry in ms, "0" for none
-- Returns {1, fence} when written, {0, stored fence} when refused, an error
-- "FENCED ..." when the key holds a value without a fence.
local cur = redis.call('GET', KEYS[1])
if cur then
  local sep = string.find(cur, ':', 1, true)
  local stored = sep and string.sub(cur, 1, sep - 1)
  if not stored or not string.match(stored, '^[1-9][0-9]*$') then
    return redis.error_reply('FENCED the key holds a value without a fence')
  end
  -- Compared as decimal strings: Lua's numbers are doubles.
  if #stored > #ARGV[1] or (#stored == #ARGV[1] and stored > ARGV[1]) then
    return {0, stored}
  end
end
if ARGV[3] == '0' then
  redis.call('SET', KEYS[1], ARGV[1] .. ':' .. ARGV[2])
else
  redis.call('SET', KEYS[1], ARGV[1] .. ':' .. ARGV[2], 'PX', ARGV[3])
end
return {1, ARGV[1]}
