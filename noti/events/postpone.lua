-- End an event's step early because one of its listeners failed and its retry policy runs it
-- again after a back-off, for the processor holding the lock. The event goes back to 'new',
-- out of the arrival queue and into the back-off set (score = due ms); activate.lua moves it
-- to the end of the arrival queue once due, where its next step runs that listener again and
-- then the listeners after it. The outcomes recorded so far ('o:<listener id>') are kept, so
-- no listener that finished runs twice; 'tries' and 'holders' start again (this step ended
-- without a death).
-- KEYS[1] processor lock, KEYS[2] event hash, KEYS[3] arrival queue, KEYS[4] 'activated'
-- index, KEYS[5] 'new' index, KEYS[6] back-off set.
-- ARGV[1] lock value, ARGV[2] id, ARGV[3] field 'a:<listener id>', ARGV[4] failed attempts,
-- ARGV[5] due (ms), ARGV[6] the waiting retry (JSON, field 'retry').
-- Returns 1 when postponed, 0 when the event is not activated, -1 when the lock is not the
-- caller's (nothing is written).
local event_key = KEYS[2]
--#include fenced.lua
redis.call('HSET', KEYS[2], 'status', 'new', ARGV[3], ARGV[4], 'retry', ARGV[6], 'tries', 0)
redis.call('HDEL', KEYS[2], 'holders')
redis.call('HINCRBY', KEYS[2], 'waits', 1)
redis.call('ZREM', KEYS[4], ARGV[2])
redis.call('ZADD', KEYS[5], redis.call('HGET', KEYS[2], 'seq'), ARGV[2])
if redis.call('LINDEX', KEYS[3], 0) == ARGV[2] then
  redis.call('LPOP', KEYS[3])
else
  redis.call('LREM', KEYS[3], 1, ARGV[2])
end
redis.call('ZADD', KEYS[6], ARGV[5], ARGV[2])
return 1
