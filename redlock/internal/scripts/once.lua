-- One vote per server per call, put in front of the scripts whose answers
-- a round counts (extend, pttl, inspect, the fence write-back's round, and
-- multi-key and batched calls): the last two ARGV are the call's nonce,
-- shared by the call's copies to every node of one round, and how long to
-- remember it in ms. A server that gets the same call a second time (two
-- node addresses that lead to it, as a proxy that moves connections makes
-- them) answers DUPLICATE, so the round counts it once. An empty nonce
-- (or none) checks nothing.
do
  local nonce = ARGV[#ARGV - 1]
  if nonce and nonce ~= '' and not redis.call('SET', 'redlock:call:' .. nonce, '', 'PX', ARGV[#ARGV], 'NX') then
    return redis.error_reply('DUPLICATE this server answered the same call through another node address')
  end
end
