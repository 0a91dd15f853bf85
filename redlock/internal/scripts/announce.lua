-- Announce on a key's release channel that its holder changed, without
-- touching the key: a new leader tells the observers of its election.
--
-- KEYS[1]  the lock key (named only so the call queues with the key's others)
-- ARGV[1]  the release channel
--
-- Returns the number of subscribers told.
return redis.call('PUBLISH', ARGV[1], KEYS[1])
