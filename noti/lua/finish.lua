-- Record the outcome of a send. Fenced: only the lease owner of a waiting record may finish it.
-- KEYS[1] record, KEYS[2] waiting index, KEYS[3] delayed set,
-- KEYS[4..7] status indexes for -1, 0, 1, 10, KEYS[8] dead-letter stream.
-- ARGV[1] owner, ARGV[2] now (ms), ARGV[3] new status, ARGV[4] errmsg,
-- ARGV[5] not-before (ms; for status 1 the record is re-queued then), ARGV[6] retry count,
-- ARGV[7] expi ("" = none), ARGV[8] JSON object of extra fields to set,
-- ARGV[9] JSON object of the dead-letter entry ("" = none), ARGV[10] dead-letter max length.
-- Returns 1 when applied, 0 when the caller no longer holds the lease.
local key = KEYS[1]
local st, owner, id = unpack(redis.call('HMGET', key, 'noti_st', '_owner', 'id'))
if st ~= '1' or owner ~= ARGV[1] then
  return 0
end
local now, new_st = ARGV[2], ARGV[3]
redis.call('HSET', key, 'noti_st', new_st, 'noti_errmsg', ARGV[4], 'noti_timeout_at', ARGV[5],
  'noti_retry', ARGV[6], 'lm', now)
redis.call('HDEL', key, '_owner', '_inflight')
if ARGV[7] ~= '' then
  redis.call('HSET', key, 'expi', ARGV[7])
end
for field, value in pairs(cjson.decode(ARGV[8])) do
  redis.call('HSET', key, field, value)
end
if new_st == '1' then
  redis.call('ZADD', KEYS[3], ARGV[5], id)
else
  redis.call('ZREM', KEYS[2], id)
  redis.call('ZREM', KEYS[6], id)
  local index = {['-1'] = KEYS[4], ['0'] = KEYS[5], ['10'] = KEYS[7]}
  redis.call('ZADD', index[new_st], now, id)
end
if ARGV[9] ~= '' then
  local entry = {}
  for field, value in pairs(cjson.decode(ARGV[9])) do
    entry[#entry + 1] = field
    entry[#entry + 1] = tostring(value)
  end
  redis.call('XADD', KEYS[8], 'MAXLEN', '~', ARGV[10], '*', unpack(entry))
end
return 1
