-- Store a listener if the one stored under its name is still what the caller read.
-- KEYS[1] listeners hash, KEYS[2] listeners version counter.
-- ARGV[1] name, ARGV[2] expected stored JSON ('' = no listener of that name), ARGV[3] new JSON.
-- Returns 1 when stored, 0 when the stored listener changed meanwhile.
local current = redis.call('HGET', KEYS[1], ARGV[1])
if (current or '') ~= ARGV[2] then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
redis.call('INCR', KEYS[2])
return 1
