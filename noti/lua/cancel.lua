-- Cancel a scheduled record: delete it, but only while it still waits in the delayed set
-- untouched by any sender (never claimed, not taken by the pump).
-- KEYS[1] record, KEYS[2] all index, KEYS[3] creator index, KEYS[4] waiting index,
-- KEYS[5] delayed set, KEYS[6..9] status indexes, KEYS[10] identifier key (or KEYS[1]),
-- KEYS[11] counters hash, KEYS[12] its address index (noti/core/search.py).
-- ARGV[1] id, ARGV[2] creator the caller read.
-- Returns 1 cancelled, 0 missing, -1 creator mismatch, -2 already queued or attempted.
--#include tally.lua
--#include timeline.lua
local st, claims, not_before, creator, kind =
  unpack(redis.call('HMGET', KEYS[1], 'noti_st', '_claims', 'noti_timeout_at', 'noti_c', 'noti_type'))
if not st then
  return 0
end
if creator ~= ARGV[2] then
  return -1
end
local score = redis.call('ZSCORE', KEYS[5], ARGV[1])
if st ~= '1' or claims or not score or tonumber(score) ~= tonumber(not_before) then
  return -2
end
local provider = provider_label(KEYS[1], kind or '')
redis.call('DEL', KEYS[1], tl_key(KEYS[1]))
for i = 2, 9 do
  redis.call('ZREM', KEYS[i], ARGV[1])
end
redis.call('ZREM', KEYS[12], ARGV[1])
if KEYS[10] ~= KEYS[1] and redis.call('GET', KEYS[10]) == ARGV[1] then
  redis.call('DEL', KEYS[10])
end
redis.call('HINCRBY', KEYS[11], 'cancelled|' .. (kind or '') .. '|' .. provider, 1)
return 1
