-- A fragment, not a script: claim one record. Included (--#include) by claim.lua and
-- bulk_fetch.lua, so both take a record by the same rules.
-- claim_record(key, now_ms, lease_until_ms, owner, creator, optouts) returns:
--   {1, field, value, ...}  claimed: the whole hash after the claim, plus "_suppressed" "1"
--                           when its target opted out of its channel (saves the sender a
--                           round trip before every send)
--   {2, lease_until_ms}     waiting, but another sender holds its lease
--   {5, due_ms}             waiting for its time (a delay or a back-off); the delayed set
--                           holds it, so the caller must leave it alone
--   {3, status}             not waiting (done, failed, invalid)
--   {4}                     made by another creator ("" = anyone may claim it)
--   {0}                     no such record
-- optouts maps a channel to the key of its opted-out set.
local function claim_record(key, now, lease_until, owner, creator, optouts)
  local st, lease, made_by, holder, kind, target =
    unpack(redis.call('HMGET', key, 'noti_st', 'noti_timeout_at', 'noti_c', '_owner', 'noti_type', 'noti_target'))
  if not st then
    return {0}
  elseif creator ~= '' and made_by ~= creator then
    return {4}
  elseif st ~= '1' then
    return {3, tonumber(st)}
  elseif (tonumber(lease) or 0) > now then
    return {holder and 2 or 5, tonumber(lease)}
  end
  redis.call('HSET', key, 'noti_timeout_at', lease_until, '_owner', owner, 'lm', now)
  -- _claims: ever claimed (a debounce may no longer replace it); _inflight: claims
  -- since the last finish (a record that keeps killing its sender is poison)
  redis.call('HINCRBY', key, '_claims', 1)
  redis.call('HINCRBY', key, '_inflight', 1)
  local row = redis.call('HGETALL', key)
  local set = optouts[kind]
  if set and redis.call('SISMEMBER', set, target) == 1 then
    row[#row + 1] = '_suppressed'
    row[#row + 1] = '1'
  end
  table.insert(row, 1, 1)
  return row
end
