-- Seed the restart guard's memory marker on a node of a fresh cluster, so
-- it votes at once instead of abstaining for the maximum TTL.
--
-- KEYS[1]  the node's memory marker
--
-- Returns 1 when the marker was set now, 0 when it was there already.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('SET', KEYS[1], '1')
return 1
