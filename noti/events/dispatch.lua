-- Store a new event at the end of the arrival queue, and tell whether to queue a processor.
-- KEYS[1] event hash, KEYS[2] arrival counter, KEYS[3] arrival queue, KEYS[4] all index,
-- KEYS[5] 'new' index, KEYS[6] the dispatching user's index, KEYS[7] processor lock,
-- KEYS[8] starting marker.
-- ARGV[1] id, ARGV[2] name, ARGV[3] user, ARGV[4] payload JSON, ARGV[5] created ms,
-- ARGV[6] starting marker time-to-live (ms).
-- Returns {seq, 1} when the caller must queue a processor (no processor holds the lock
-- and none was queued in the last ARGV[6] ms; the marker is now set), else {seq, 0}.
local seq = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[1], 'id', ARGV[1], 'name', ARGV[2], 'user', ARGV[3], 'payload', ARGV[4],
  'created_ms', ARGV[5], 'status', 'new', 'seq', seq, 'tries', 0)
redis.call('RPUSH', KEYS[3], ARGV[1])
redis.call('ZADD', KEYS[4], seq, ARGV[1])
redis.call('ZADD', KEYS[5], seq, ARGV[1])
redis.call('ZADD', KEYS[6], seq, ARGV[1])
if redis.call('EXISTS', KEYS[7]) == 1 then
  return {seq, 0}
end
if redis.call('SET', KEYS[8], ARGV[1], 'NX', 'PX', ARGV[6]) then
  return {seq, 1}
end
return {seq, 0}
