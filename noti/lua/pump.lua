-- Take due entries of the delayed set without losing them: each taken entry stays in the
-- set, re-armed to fire again at ARGV[3] unless the pump confirms it (pump_ack.lua).
-- A pump that dies between taking and publishing therefore loses nothing.
-- KEYS[1] delayed set. ARGV[1] now (ms), ARGV[2] how many at most, ARGV[3] re-arm score.
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
for _, id in ipairs(due) do
  redis.call('ZADD', KEYS[1], 'XX', ARGV[3], id)
end
return due
