-- Activate the event at the head of the arrival queue, for the processor holding the lock.
-- A new event becomes activated; an event already activated (its processor died) is taken
-- again as it is, with tries + 1. Entries whose event is gone or done are dropped.
-- KEYS[1] processor lock, KEYS[2] arrival queue, KEYS[3] 'new' index,
-- KEYS[4] 'activated' index, KEYS[5] listeners version.
-- ARGV[1] lock value, ARGV[2] now (ms), ARGV[3] processor name, ARGV[4] event key prefix.
-- Returns {-1} when the lock is not the caller's, {0} when no event waits, else
-- {1, id, name, user, payload, created ms, seq, tries, listeners version}.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return {-1}
end
while true do
  local id = redis.call('LINDEX', KEYS[2], 0)
  if not id then
    return {0}
  end
  local key = ARGV[4] .. id
  local status = redis.call('HGET', key, 'status')
  if status == 'new' or status == 'activated' then
    if status == 'new' then
      redis.call('HSET', key, 'status', 'activated')
      redis.call('ZREM', KEYS[3], id)
      redis.call('ZADD', KEYS[4], redis.call('HGET', key, 'seq'), id)
    end
    redis.call('HSET', key, 'activated_ms', ARGV[2], 'processor', ARGV[3])
    local tries = redis.call('HINCRBY', key, 'tries', 1)
    local f = redis.call('HMGET', key, 'name', 'user', 'payload', 'created_ms', 'seq')
    return {1, id, f[1], f[2], f[3], f[4], f[5], tries, redis.call('GET', KEYS[5]) or ''}
  end
  redis.call('LPOP', KEYS[2])
end
