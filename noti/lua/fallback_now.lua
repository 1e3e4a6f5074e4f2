-- Make fallbacks due now (their notification failed before their deadline): each one still
-- waiting in the delayed set, untouched by a sender, is moved to now (never later than it
-- was) and its not-before time with it.
-- KEYS[1] delayed set, KEYS[2..] the fallback records. ARGV[1] now (ms).
-- Returns how many were moved.
local now, moved = ARGV[1], 0
for i = 2, #KEYS do
  local st, lease, holder, id = unpack(redis.call('HMGET', KEYS[i], 'noti_st', 'noti_timeout_at', '_owner', 'id'))
  if st == '1' and not (holder and (tonumber(lease) or 0) > tonumber(now)) then
    if redis.call('ZADD', KEYS[1], 'XX', 'LT', 'CH', now, id) == 1 then
      redis.call('HSET', KEYS[i], 'noti_timeout_at', now)
      moved = moved + 1
    end
  end
end
return moved
