-- Record an activated event as done, for the processor holding the lock.
-- KEYS[1] processor lock, KEYS[2] arrival queue, KEYS[3] 'activated' index,
-- KEYS[4] 'done' index, KEYS[5] event hash, KEYS[6] counters hash (noti/redis/counters.py:
-- events_done|ok, or events_done|error when ARGV[5] names an error).
-- ARGV[1] lock value, ARGV[2] id, ARGV[3] now (ms), ARGV[4] return data (JSON),
-- ARGV[5] error code, ARGV[6] error message. The listener outcomes recorded one by one
-- (outcome.lua, fields 'o:<listener id>') and the listeners' failed attempts ('a:<listener
-- id>', postpone.lua) are dropped: the return data holds them all now.
-- Returns 1 when done, 0 when the event is not activated any more, -1 when the lock is
-- not the caller's (another processor owns the queue now: nothing is written).
local event_key = KEYS[5]
--#include fenced.lua
redis.call('HSET', KEYS[5], 'status', 'done', 'done_ms', ARGV[3], 'result', ARGV[4],
  'error_code', ARGV[5], 'error_message', ARGV[6])
redis.call('HDEL', KEYS[5], 'rerun', 'retry')
for _, f in ipairs(redis.call('HKEYS', KEYS[5])) do
  local prefix = string.sub(f, 1, 2)
  if prefix == 'o:' or prefix == 'a:' then
    redis.call('HDEL', KEYS[5], f)
  end
end
redis.call('ZREM', KEYS[3], ARGV[2])
redis.call('ZADD', KEYS[4], ARGV[3], ARGV[2])
redis.call('HINCRBY', KEYS[6], ARGV[5] == '' and 'events_done|ok' or 'events_done|error', 1)
if redis.call('LINDEX', KEYS[2], 0) == ARGV[2] then
  redis.call('LPOP', KEYS[2])
else
  redis.call('LREM', KEYS[2], 1, ARGV[2])
end
return 1
