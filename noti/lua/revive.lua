-- Put a failed (0) or invalid (-1) record back to waiting with its attempts reset.
-- KEYS[1] record, KEYS[2] waiting index, KEYS[3..6] status indexes for -1, 0, 1, 10,
-- KEYS[7] counters hash.
-- ARGV[1] id, ARGV[2] now (ms).
-- Returns {1, type, level} when revived, {0, status} when it was not failed/invalid,
-- {-1} when missing.
--#include tally.lua
--#include timeline.lua
local st, kind, level = unpack(redis.call('HMGET', KEYS[1], 'noti_st', 'noti_type', 'noti_lv'))
if not st then
  return {-1}
end
if st ~= '0' and st ~= '-1' then
  return {0, tonumber(st)}
end
redis.call('HSET', KEYS[1], 'noti_st', 1, 'noti_retry', 0, 'noti_timeout_at', 0, 'noti_errmsg', '', 'lm', ARGV[2])
redis.call('HDEL', KEYS[1], '_claims', '_inflight', '_owner', 'expi')
redis.call('ZREM', KEYS[st == '0' and 4 or 3], ARGV[1])
redis.call('ZADD', KEYS[5], ARGV[2], ARGV[1])
redis.call('ZADD', KEYS[2], -tonumber(level), ARGV[1])
tl_add(KEYS[1], tl_step(ARGV[2], 'requeued', {was = st == '0' and 'failed' or 'invalid'}))
redis.call('HINCRBY', KEYS[7], 'revived|' .. (kind or '') .. '|' .. provider_label(KEYS[1], kind or ''), 1)
return {1, kind, tonumber(level)}
