-- Writes a hash field only if the fence offered is at or above the fence
-- stored with the field's value. The value is stored as "<fence>:<payload>";
-- each field keeps its own fence.
-- KEYS[1] the hash
-- ARGV[1] the field
-- ARGV[2] the fence, decimal, no leading zeros
-- ARGV[3] the payload
-- Returns {1, fence} when written, {0, stored fence} when refused, an error
-- "FENCED ..." when the field holds a value without a fence.
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur then
  local sep = string.find(cur, ':', 1, true)
  local stored = sep and string.sub(cur, 1, sep - 1)
  if not stored or not string.match(stored, '^[1-9][0-9]*$') then
    return redis.error_reply('FENCED the field holds a value without a fence')
  end
  -- Compared as decimal strings: Lua's numbers are doubles.
  if #stored > #ARGV[2] or (#stored == #ARGV[2] and stored > ARGV[2]) then
    return {0, stored}
  end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2] .. ':' .. ARGV[3])
return {1, ARGV[2]}
