-- Store a new event at the end of the arrival queue, and tell whether to queue a processor.
-- KEYS[1] event hash, KEYS[2] arrival counter, KEYS[3] arrival queue, KEYS[4] all index,
-- KEYS[5] 'new' index, KEYS[6] the dispatching user's index, KEYS[7] processor lock,
-- KEYS[8] starting marker, KEYS[9] idempotency key (unused when ARGV[7] is ''),
-- KEYS[10] counters hash (noti/redis/counters.py).
-- ARGV[1] id, ARGV[2] name, ARGV[3] user, ARGV[4] payload JSON, ARGV[5] created ms,
-- ARGV[6] starting marker time-to-live (ms), ARGV[7] idempotency key time-to-live (ms; ''
-- = no idempotency key).
-- Returns {seq, start, id}: start is 1 when the caller must queue a processor (no processor
-- holds the lock and none was queued in the last ARGV[6] ms; the marker is now set), else 0.
-- When the idempotency key names an event already, nothing is stored: seq is 0 and id is
-- that event's (a processor is still asked for if events wait without one).
local existing = false
if ARGV[7] ~= '' then
  existing = redis.call('GET', KEYS[9])
end
local seq = 0
local id = ARGV[1]
if existing then
  id = existing
else
  if ARGV[7] ~= '' then
    redis.call('SET', KEYS[9], ARGV[1], 'PX', ARGV[7])
  end
  seq = redis.call('INCR', KEYS[2])
  redis.call('HSET', KEYS[1], 'id', ARGV[1], 'name', ARGV[2], 'user', ARGV[3], 'payload', ARGV[4],
    'created_ms', ARGV[5], 'status', 'new', 'seq', seq, 'tries', 0)
  redis.call('RPUSH', KEYS[3], ARGV[1])
  redis.call('ZADD', KEYS[4], seq, ARGV[1])
  redis.call('ZADD', KEYS[5], seq, ARGV[1])
  redis.call('ZADD', KEYS[6], seq, ARGV[1])
  redis.call('HINCRBY', KEYS[10], 'events_dispatched', 1)
end
if redis.call('EXISTS', KEYS[7]) == 1 then
  return {seq, 0, id}
end
if existing and redis.call('LLEN', KEYS[3]) == 0 then
  return {seq, 0, id}
end
if redis.call('SET', KEYS[8], id, 'NX', 'PX', ARGV[6]) then
  return {seq, 1, id}
end
return {seq, 0, id}
