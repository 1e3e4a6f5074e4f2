-- Extend the processor lock if the caller still holds it.
-- KEYS[1] processor lock. ARGV[1] lock value, ARGV[2] time-to-live (ms).
-- Returns 1 when renewed, 0 when the lock is not the caller's.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
