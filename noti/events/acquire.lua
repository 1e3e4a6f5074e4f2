-- Take the processor lock if no processor holds it. Either way the starting marker is
-- dropped: the processor it announced has started (it holds the lock now, or found one that
-- does and exits), so from this moment a dispatch that finds no lock queues a processor at
-- once instead of waiting for the marker to expire and the sweep to notice.
-- KEYS[1] processor lock, KEYS[2] starting marker.
-- ARGV[1] lock value, ARGV[2] time-to-live (ms).
-- Returns 1 when the lock was taken, 0 when another processor holds it.
redis.call('DEL', KEYS[2])
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 1
end
return 0
