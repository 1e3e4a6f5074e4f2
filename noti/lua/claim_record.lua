-- A fragment, not a script: claim one record. Included (--#include) by claim.lua and
-- bulk_fetch.lua, so both take a record by the same rules.
-- claim_record(key, times, owner, creator, optouts) returns:
--   {1, field, value, ...}  claimed: the whole hash after the claim, plus "_suppressed" "1"
--                           when its target opted out of its channel (saves the sender a
--                           round trip before every send), and "_prefout" "<why>" when its
--                           recipient's preferences refuse it now (preference.lua, which
--                           the including script includes first)
--   {2, lease_until_ms}     waiting, but another sender holds its lease
--   {5, due_ms}             waiting for its time (a delay or a back-off); the delayed set
--                           holds it, so the caller must leave it alone
--   {3, status}             not waiting (done, failed, invalid)
--   {4}                     made by another creator ("" = anyone may claim it)
--   {0}                     no such record
-- times is claim_times(now_ms, lease_ms); optouts maps a channel to the key of its
-- opted-out set. A claim is a step of the record's timeline (timeline.lua, which the
-- including script includes first): the worker, and the claims since the last finish.

-- A time (ms) as the text HSET stores for it: Redis writes a whole number below 2^53 as
-- plain digits (older versions with "%.17g", newer as an integer); anything else stays a
-- number for Redis to write as it always did.
local function ms_text(ms)
  if ms > 0 and ms < 2 ^ 53 and ms % 1 == 0 then
    return string.format('%d', ms)
  end
  return ms
end

-- Now and the lease's end (ms) for every claim of a script: numbers to compare, and the
-- text to store, made once (Redis turning a Lua number into text costs more, per claim).
local function claim_times(now_ms, lease_ms)
  local now = tonumber(now_ms)
  local lease_until = now + tonumber(lease_ms)
  return {now = now, now_text = ms_text(now), lease_text = ms_text(lease_until)}
end

-- A count HINCRBY adds 1 to, as the text HINCRBY would store ("1" when absent), or nil when
-- it is not a plain count of up to 9 digits (HINCRBY then does it, or refuses it).
local function plus_one(count)
  if not count then
    return '1'
  elseif count == '0' or string.match(count, '^[1-9]%d?%d?%d?%d?%d?%d?%d?%d?$') then
    return tostring(tonumber(count) + 1)
  end
end

local function claim_record(key, times, owner, creator, optouts)
  local st, lease, made_by, holder, kind, target, claims, inflight, pref = unpack(redis.call('HMGET',
    key, 'noti_st', 'noti_timeout_at', 'noti_c', '_owner', 'noti_type', 'noti_target', '_claims',
    '_inflight', 'noti_pref'))
  if not st then
    return {0}
  elseif creator ~= '' and made_by ~= creator then
    return {4}
  elseif st ~= '1' then
    return {3, tonumber(st)}
  elseif (tonumber(lease) or 0) > times.now then
    return {holder and 2 or 5, tonumber(lease)}
  end
  -- _claims: ever claimed (a debounce may no longer replace it); _inflight: claims
  -- since the last finish (a record that keeps killing its sender is poison)
  claims, inflight = plus_one(claims), plus_one(inflight)
  if claims and inflight then -- one HSET writes what the HINCRBYs below would
    redis.call('HSET', key, 'noti_timeout_at', times.lease_text, '_owner', owner,
      'lm', times.now_text, '_claims', claims, '_inflight', inflight)
  else
    redis.call('HSET', key, 'noti_timeout_at', times.lease_text, '_owner', owner,
      'lm', times.now_text)
    redis.call('HINCRBY', key, '_claims', 1)
    redis.call('HINCRBY', key, '_inflight', 1)
  end
  tl_add(key, tl_step(times.now, 'claimed', {worker = string.match(owner, '^(.*):%x+$') or owner,
    claims = tonumber(inflight or redis.call('HGET', key, '_inflight'))}))
  local row = redis.call('HGETALL', key)
  local set = optouts[kind]
  if set and redis.call('SISMEMBER', set, target) == 1 then
    row[#row + 1] = '_suppressed'
    row[#row + 1] = '1'
  end
  if pref then
    local why = record_preference_out(pref)
    if why then
      row[#row + 1] = '_prefout'
      row[#row + 1] = why
    end
  end
  table.insert(row, 1, 1)
  return row
end
