-- Remove done events finished before ARGV[1] (ms), at most ARGV[2] of them.
-- KEYS[1] 'done' index, KEYS[2] all index.
-- ARGV[3] event key prefix, ARGV[4] user index prefix (keys built from the event's fields).
-- Returns the number of events removed.
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
for _, id in ipairs(ids) do
  local key = ARGV[3] .. id
  local user = redis.call('HGET', key, 'user')
  if user then
    redis.call('ZREM', ARGV[4] .. user, id)
  end
  redis.call('DEL', key)
  redis.call('ZREM', KEYS[1], id)
  redis.call('ZREM', KEYS[2], id)
end
return #ids
