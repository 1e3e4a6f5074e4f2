-- Remove a listener if it is still what the caller read.
-- KEYS[1] listeners hash, KEYS[2] listeners version counter.
-- ARGV[1] name, ARGV[2] expected stored JSON.
-- Returns 1 when removed, 0 when it changed or was removed meanwhile.
local current = redis.call('HGET', KEYS[1], ARGV[1])
if not current or current ~= ARGV[2] then
  return 0
end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('INCR', KEYS[2])
return 1
