-- Let go of the processor lock and record how the processor stopped.
-- Checking the queue and deleting the lock in one step closes the race with dispatch:
-- an event stored before this sees the queue non-empty; one stored after finds no lock.
-- The starting marker is made exact here too: it is set only when the caller is about to
-- queue its successor, and dropped otherwise, so the next dispatch queues a processor at
-- once rather than waiting for a marker left by an earlier dispatch to expire.
-- A retry whose back-off has passed (KEYS[5], score = due ms) counts as an event waiting.
-- KEYS[1] processor lock, KEYS[2] arrival queue, KEYS[3] starting marker, KEYS[4] stop record,
-- KEYS[5] back-off set.
-- ARGV[1] lock value, ARGV[2] mode: 'idle' (only if no event waits), 'handover' (the caller
-- queues a successor if events wait) or 'stop' (it queues none: the next dispatch or the
-- sweep will), ARGV[3] starting marker time-to-live (ms), ARGV[4] now (ms), ARGV[5] reason,
-- ARGV[6] events processed, ARGV[7] processor name, ARGV[8] since (ms).
-- Returns -1 when the lock is not the caller's; 0 in idle mode when events wait (keep
-- going); 1 when released and nothing waits (or mode 'stop'); 2 when released in handover
-- mode and events wait: the caller queues its successor (the starting marker is set, so
-- dispatches do not queue another).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return -1
end
local waiting = redis.call('LLEN', KEYS[2])
  + #redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', ARGV[4], 'LIMIT', 0, 1)
if ARGV[2] == 'idle' and waiting > 0 then
  return 0
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[4], 'reason', ARGV[5], 'ms', ARGV[4], 'processed', ARGV[6],
  'processor', ARGV[7], 'since_ms', ARGV[8], 'waiting', waiting)
if ARGV[2] == 'handover' and waiting > 0 then
  redis.call('SET', KEYS[3], ARGV[7], 'PX', ARGV[3])
  return 2
end
redis.call('DEL', KEYS[3])
return 1
