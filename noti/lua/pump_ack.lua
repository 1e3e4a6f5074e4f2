-- Confirm published entries: remove each one still armed with the score the pump gave it
-- (one re-scheduled meanwhile keeps its new due time).
-- KEYS[1] delayed set. ARGV[1] the re-arm score, ARGV[2..] ids.
local removed = 0
for i = 2, #ARGV do
  if tonumber(redis.call('ZSCORE', KEYS[1], ARGV[i])) == tonumber(ARGV[1]) then
    removed = removed + redis.call('ZREM', KEYS[1], ARGV[i])
  end
end
return removed
