-- Store a new waiting record unless its idempotency key was used already.
-- KEYS[1] idempotency key, KEYS[2] record, KEYS[3] all index, KEYS[4] creator index,
-- KEYS[5] waiting status index, KEYS[6] waiting index, KEYS[7] delayed set.
-- ARGV[1] id, ARGV[2] key time-to-live (ms), ARGV[3] created ms, ARGV[4] level,
-- ARGV[5] due ms (0 = now), ARGV[6..] record field/value pairs.
-- Returns {1, id} when stored, {0, existing id} when the key named a record already.
local existing = redis.call('GET', KEYS[1])
if existing then
  return {0, existing}
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
local fields = {}
for i = 6, #ARGV do
  fields[#fields + 1] = ARGV[i]
end
redis.call('HSET', KEYS[2], unpack(fields))
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[1])
redis.call('ZADD', KEYS[4], ARGV[3], ARGV[1])
redis.call('ZADD', KEYS[5], ARGV[3], ARGV[1])
redis.call('ZADD', KEYS[6], -tonumber(ARGV[4]), ARGV[1])
if tonumber(ARGV[5]) > 0 then
  redis.call('ZADD', KEYS[7], ARGV[5], ARGV[1])
end
return {1, ARGV[1]}
