-- Revoke records (Celery's revoke of a notification's task id): a waiting record becomes
-- invalid (-1) with noti_revoked_at set, so nothing sends it, re-queues it or sweeps it back
-- later. A record another sender holds the lease of is left to that sender (it revokes it
-- itself if the revoke reached it before its send; a send in progress cannot be undone), with
-- noti_revoke_requested set: whoever claims the record next revokes it instead of sending.
-- KEYS[1] waiting index, KEYS[2] delayed set, KEYS[3] status index of -1, KEYS[4] status
-- index of 1, KEYS[5] counters hash, KEYS[6..] the records.
-- ARGV[1] now (ms), ARGV[2] errmsg, ARGV[3] owner token of the caller's own claims ("" = none).
-- Returns one value per record: 1 revoked, 0 no such record, 2 another sender holds it,
-- 3 not waiting any more (done, failed, invalid or already revoked).
--#include tally.lua
--#include timeline.lua
local now, errmsg, owner = ARGV[1], ARGV[2], ARGV[3]
local out, counts = {}, {}
for i = 6, #KEYS do
  local key = KEYS[i]
  local st, lease, holder, id, kind =
    unpack(redis.call('HMGET', key, 'noti_st', 'noti_timeout_at', '_owner', 'id', 'noti_type'))
  if not st then
    out[#out + 1] = 0
  elseif st ~= '1' then
    out[#out + 1] = 3
  elseif holder and holder ~= owner and (tonumber(lease) or 0) > tonumber(now) then
    redis.call('HSET', key, 'noti_revoke_requested', now)
    out[#out + 1] = 2
  else
    redis.call('HSET', key, 'noti_st', '-1', 'noti_errmsg', errmsg, 'noti_timeout_at', 0, 'lm', now,
      'noti_revoked_at', now)
    redis.call('HDEL', key, '_owner', '_inflight', 'noti_revoke_requested')
    redis.call('ZREM', KEYS[1], id)
    redis.call('ZREM', KEYS[2], id)
    redis.call('ZREM', KEYS[4], id)
    redis.call('ZADD', KEYS[3], now, id)
    tl_add(key, tl_step(now, 'revoked', {text = errmsg}))
    count(counts, 'revoked|' .. (kind or '') .. '|' .. provider_label(key, kind or ''))
    out[#out + 1] = 1
  end
end
tally_write(KEYS[5], counts)
return out
