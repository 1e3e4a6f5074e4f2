-- Store a listener if the one stored under its name is still what the caller read.
-- KEYS[1] listeners hash, KEYS[2] listeners version counter.
-- ARGV[1] name, ARGV[2] expected stored JSON ('' = no listener of that name), ARGV[3] new JSON
-- (an object: it ends with '}').
-- The stored JSON gets "seq": the version this change made, its place in the running order
-- (ids made in one millisecond do not sort by creation).
-- Returns the version (> 0) when stored, 0 when the stored listener changed meanwhile.
local current = redis.call('HGET', KEYS[1], ARGV[1])
if (current or '') ~= ARGV[2] then
  return 0
end
local version = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[1], ARGV[1], string.sub(ARGV[3], 1, -2) .. ',"seq":' .. version .. '}')
return version
