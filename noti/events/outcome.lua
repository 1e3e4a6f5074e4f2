-- Record one listener's outcome on an activated event, for the processor holding the lock.
-- Recorded outcomes survive a change of processor: a successor that takes the event over
-- (its predecessor died or stalled) runs only the listeners without one. A listener that
-- gave up after its retry policy's last attempt gets its dead letter in the same step.
-- KEYS[1] processor lock, KEYS[2] event hash, KEYS[3] dead-letter stream.
-- ARGV[1] lock value, ARGV[2] field ('o:<listener id>'), ARGV[3] outcome (JSON),
-- ARGV[4] dead-letter stream max length ('' = no dead letter), ARGV[5..] the dead letter's
-- fields (field, value, …).
-- Returns 1 when recorded, 0 when the event is not activated, -1 when the lock is not the
-- caller's (nothing is written: the caller stops).
local event_key = KEYS[2]
--#include fenced.lua
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
if ARGV[4] ~= '' then
  redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[4], '*', unpack(ARGV, 5))
end
return 1
