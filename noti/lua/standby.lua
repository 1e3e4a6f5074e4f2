-- A fragment, not a script: a notification's fallback record (noti/delivery/fallback.py), as
-- delivery.lua and fallback_now.lua act on it. Included (--#include) where they need it.
-- standby_free(key, now) returns the fallback's id when it still waits untouched (status 1,
-- no sender holding its lease now), else nil: only then may it be cancelled or hastened.
-- standby_now(delayed, key, id, now) makes it due now (never later than it was), its
-- not-before time with it, a step of its timeline (timeline.lua, included first by the
-- including script); true when it moved.
local function standby_free(key, now)
  local st, lease, holder, id = unpack(redis.call('HMGET', key, 'noti_st', 'noti_timeout_at', '_owner', 'id'))
  if st == '1' and not (holder and (tonumber(lease) or 0) > tonumber(now)) then
    return id
  end
  return nil
end

local function standby_now(delayed, key, id, now)
  if redis.call('ZADD', delayed, 'XX', 'LT', 'CH', now, id) == 1 then
    redis.call('HSET', key, 'noti_timeout_at', now)
    tl_add(key, tl_step(now, 'fallback', {why = 'due now: the notification it stands in for was not delivered'}))
    return true
  end
  return false
end
