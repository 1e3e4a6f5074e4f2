-- Close one due digest window (noti/recipients/digests.py): the window leaves its digest's
-- hash (the next event opens a new one) and becomes a closed window, in one atomic step with
-- the events added (digest_add.lua); the closed window waits in the closing set until its
-- notice is made (by whoever closed it, or after the lease by the next run).
-- KEYS: 1 the digest's hash, 2 the due set, 3 the closing set, 4 the owner's index of open
-- windows.
-- ARGV: 1 now ms, 2 the lease ms, 3 the prefix of closed windows' hashes.
-- Returns the window id, or false when the digest has no window due (closed already).
local window, due, n, doc, first = unpack(redis.call('HMGET', KEYS[1], 'w', 'due', 'n', 'doc', 'first'))
if not window then
  redis.call('ZREM', KEYS[2], KEYS[1])
  redis.call('ZREM', KEYS[4], KEYS[1])
  return false
end
if tonumber(due) > tonumber(ARGV[1]) then
  return false
end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], KEYS[1])
redis.call('ZREM', KEYS[4], KEYS[1])
redis.call('HSET', ARGV[3] .. window, 'digest', KEYS[1], 'n', n, 'doc', doc, 'due', due, 'first', first or '0')
redis.call('ZADD', KEYS[3], tonumber(ARGV[1]) + tonumber(ARGV[2]), window)
return window
