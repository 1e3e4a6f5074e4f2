-- Should a processor be queued? Yes when events wait (in the arrival queue, or in the back-off
-- set with their listener's retry due: the processor moves those to the queue), no processor
-- holds the lock and none was queued in the last ARGV[1] ms; then the starting marker is set
-- for ARGV[1] ms.
-- KEYS[1] arrival queue, KEYS[2] processor lock, KEYS[3] starting marker, KEYS[4] back-off set.
-- ARGV[1] marker time-to-live (ms), ARGV[2] marker value, ARGV[3] now (ms).
-- Returns 1 when the caller must queue a processor, else 0.
if redis.call('EXISTS', KEYS[2]) == 1 then
  return 0
end
if redis.call('LLEN', KEYS[1]) == 0
  and #redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', ARGV[3], 'LIMIT', 0, 1) == 0 then
  return 0
end
if redis.call('SET', KEYS[3], ARGV[2], 'NX', 'PX', ARGV[1]) then
  return 1
end
return 0
