-- Claim records for sending: only a waiting record whose lease has expired is taken.
-- KEYS[1..n] record hashes, then one opted-out set per channel.
-- ARGV[1] now (ms), ARGV[2] lease length (ms), ARGV[3] owner token,
-- ARGV[4] creator the record must have ("" = anyone), ARGV[5] n,
-- ARGV[6..] the channel of each opted-out set, in the order of the keys.
-- Returns one entry per record:
--   {1, field, value, ...}  claimed: the whole hash after the claim, plus "_suppressed" "1"
--                           when its target opted out of its channel (saves the sender a
--                           round trip before every send)
--   {2, lease_until_ms}     waiting, but another sender holds its lease
--   {5, due_ms}             waiting for its time (a delay or a back-off); the delayed set
--                           holds it, so the caller must leave it alone
--   {3, status}             not waiting (done, failed, invalid)
--   {4}                     made by another creator
--   {0}                     no such record
local now = tonumber(ARGV[1])
local lease_until = now + tonumber(ARGV[2])
local n = tonumber(ARGV[5])
local suppressed = {}
for j = 6, #ARGV do
  suppressed[ARGV[j]] = KEYS[n + j - 5]
end
local out = {}
for i = 1, n do
  local key = KEYS[i]
  local st, lease, creator, owner = unpack(redis.call('HMGET', key, 'noti_st', 'noti_timeout_at', 'noti_c', '_owner'))
  if not st then
    out[i] = {0}
  elseif ARGV[4] ~= '' and creator ~= ARGV[4] then
    out[i] = {4}
  elseif st ~= '1' then
    out[i] = {3, tonumber(st)}
  elseif (tonumber(lease) or 0) > now then
    out[i] = {owner and 2 or 5, tonumber(lease)}
  else
    redis.call('HSET', key, 'noti_timeout_at', lease_until, '_owner', ARGV[3], 'lm', now)
    -- _claims: ever claimed (a debounce may no longer replace it); _inflight: claims
    -- since the last finish (a record that keeps killing its sender is poison)
    redis.call('HINCRBY', key, '_claims', 1)
    redis.call('HINCRBY', key, '_inflight', 1)
    local row = redis.call('HGETALL', key)
    local kind, target = unpack(redis.call('HMGET', key, 'noti_type', 'noti_target'))
    local optouts = suppressed[kind]
    if optouts and redis.call('SISMEMBER', optouts, target) == 1 then
      row[#row + 1] = '_suppressed'
      row[#row + 1] = '1'
    end
    table.insert(row, 1, 1)
    out[i] = row
  end
end
return out
