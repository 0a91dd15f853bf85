-- Seed the restart guard's memory marker on a node of a fresh cluster, so
-- it votes at once instead of abstaining for the maximum TTL.
--
-- KEYS[1]  the node's memory marker
-- KEYS[2]  the node's quarantine key
--
-- Returns 1 when the marker was set now, 0 when it was there already, and
-- -n when the node already noticed a loss and abstains for n ms more (the
-- quarantine is left alone: it protects locks the node forgot).
local left = redis.call('PTTL', KEYS[2])
if left > 0 then
  return -left
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('SET', KEYS[1], '1')
return 1
