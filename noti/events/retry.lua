-- Queue a done event again, in a new step at the end of the arrival queue, to re-run some of
-- its listeners (the processor keeps the other outcomes of its return data).
-- KEYS[1] event hash, KEYS[2] arrival queue, KEYS[3] 'new' index, KEYS[4] 'done' index,
-- KEYS[5] processor lock, KEYS[6] starting marker.
-- ARGV[1] id, ARGV[2] the listeners to re-run (JSON list of names; [] = every listener, for
-- an event set aside as poison), ARGV[3] now (ms), ARGV[4] starting marker time-to-live (ms).
-- Returns {state, start}: state 1 queued, 0 the event is not done (nothing changed), -1 it is
-- gone; start 1 when the caller must queue a processor (as dispatch.lua).
local status = redis.call('HGET', KEYS[1], 'status')
if not status then
  return {-1, 0}
end
if status ~= 'done' then
  return {0, 0}
end
redis.call('HSET', KEYS[1], 'status', 'new', 'rerun', ARGV[2], 'retried_ms', ARGV[3], 'tries', 0)
redis.call('HDEL', KEYS[1], 'holders', 'done_ms')
redis.call('HINCRBY', KEYS[1], 'replays', 1)
redis.call('ZREM', KEYS[4], ARGV[1])
redis.call('ZADD', KEYS[3], redis.call('HGET', KEYS[1], 'seq'), ARGV[1])
redis.call('RPUSH', KEYS[2], ARGV[1])
if redis.call('EXISTS', KEYS[5]) == 1 then
  return {1, 0}
end
if redis.call('SET', KEYS[6], ARGV[1], 'NX', 'PX', ARGV[4]) then
  return {1, 1}
end
return {1, 0}
