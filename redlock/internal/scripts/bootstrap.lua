-- Seed the restart guard's memory marker on a node of a fresh cluster, so
-- it votes at once instead of abstaining for the maximum TTL. The marker
-- is stamped as the acquire script stamps it: the server's run_id and its
-- count of evicted keys.
--
-- KEYS[1]  the node's memory marker
-- KEYS[2]  the node's quarantine key
-- ARGV[1]  the restart guard's maximum TTL in ms, "0" when unknown
-- ARGV[2]  "1" when the caller has checked that no lock is held on the
--          cluster (Bootstrap with ClearQuarantine): a quarantine, or a
--          marker with another stamp, then protects nothing, and the node
--          is stamped and votes at once (optional)
--
-- Returns 1 when the marker was set now, 0 when it was there already with
-- this stamp, and -n when the node abstains for n ms more: it already
-- noticed a loss (the quarantine is left alone: it protects locks the node
-- forgot), or it notices one now. A marker with another stamp is such a
-- loss (the node restarted, reloaded older data, was promoted from replica
-- or evicted keys since it was stamped), never a fresh node: with the
-- maximum TTL known the quarantine starts now; without it the marker is
-- left for the first guarded acquisition to notice, and an ABSTAIN error
-- says so. A node that may evict keys answers ABSTAIN too.
local info = redis.pcall('INFO', 'server', 'memory', 'stats')
if type(info) ~= 'string' then
  return redis.error_reply('ABSTAIN the restart guard needs Redis 7.0 or later (INFO of several sections)')
end
-- Plain searches: a pattern run over the whole reply costs more than
-- INFO itself.
local function field(name, pattern)
  local i = string.find(info, '\r\n' .. name .. ':', 1, true)
  return i and string.match(info, pattern, i + #name + 3)
end
local policy = field('maxmemory_policy', '^[%w-]+')
local run = field('run_id', '^%x+')
local evicted = field('evicted_keys', '^%d+')
if not (policy and run and evicted) then
  return redis.error_reply('ABSTAIN INFO shows no run_id, maxmemory_policy or evicted_keys')
end
if policy ~= 'noeviction' and field('maxmemory', '^%d+') ~= '0' then
  return redis.error_reply('ABSTAIN maxmemory-policy ' .. policy .. ' may evict lock keys: set noeviction or maxmemory 0')
end
local stamp = run .. ' ' .. evicted
if ARGV[2] == '1' then
  redis.call('DEL', KEYS[2])
  redis.call('SET', KEYS[1], stamp)
  return 1
end
local left = redis.call('PTTL', KEYS[2])
if left > 0 then
  return -left
end
local marker = redis.call('GET', KEYS[1])
if marker == stamp then
  return 0
end
if marker then
  -- Two fence windows (200 ms) longer than the maximum TTL, as acquire.lua.
  local guard = tonumber(ARGV[1])
  if guard > 0 then
    guard = guard + 200
    redis.call('SET', KEYS[2], '1', 'PX', guard)
    redis.call('SET', KEYS[1], stamp)
    return -guard
  end
  return redis.error_reply('ABSTAIN node lost its memory since its marker was set (restart, reload, promotion or eviction): not seeded')
end
redis.call('SET', KEYS[1], stamp)
return 1
