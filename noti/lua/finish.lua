-- Record the outcome of a send. Fenced: only the lease owner of a waiting record may finish it.
-- KEYS[1] record, KEYS[2] waiting index, KEYS[3] delayed set,
-- KEYS[4..7] status indexes for -1, 0, 1, 10.
-- ARGV[1] owner, ARGV[2] now (ms), ARGV[3] new status, ARGV[4] errmsg,
-- ARGV[5] not-before (ms; for status 1 the record is re-queued then), ARGV[6] retry count,
-- ARGV[7] expi ("" = none), ARGV[8..] extra field/value pairs.
-- Returns 1 when applied, 0 when the caller no longer holds the lease.
local key = KEYS[1]
local st, owner, id = unpack(redis.call('HMGET', key, 'noti_st', '_owner', 'id'))
if st ~= '1' or owner ~= ARGV[1] then
  return 0
end
local now, new_st = ARGV[2], ARGV[3]
redis.call('HSET', key, 'noti_st', new_st, 'noti_errmsg', ARGV[4], 'noti_timeout_at', ARGV[5],
  'noti_retry', ARGV[6], 'lm', now)
redis.call('HDEL', key, '_owner')
if ARGV[7] ~= '' then
  redis.call('HSET', key, 'expi', ARGV[7])
end
for i = 8, #ARGV, 2 do
  redis.call('HSET', key, ARGV[i], ARGV[i + 1])
end
if new_st == '1' then
  redis.call('ZADD', KEYS[3], ARGV[5], id)
else
  redis.call('ZREM', KEYS[2], id)
  redis.call('ZREM', KEYS[6], id)
  local index = {['-1'] = KEYS[4], ['0'] = KEYS[5], ['10'] = KEYS[7]}
  redis.call('ZADD', index[new_st], now, id)
end
return 1
