-- Schedule a record under an identifier (debounce): while the record the identifier names
-- is still waiting in the delayed set, untouched by any sender, replace its content and
-- restart its delay; otherwise store the new record and point the identifier at it.
-- KEYS[1] identifier key, KEYS[2] the current record's key (KEYS[3] when there is none),
-- KEYS[3] new record, KEYS[4] all index, KEYS[5] creator index, KEYS[6] status-1 index,
-- KEYS[7] waiting index, KEYS[8] delayed set, KEYS[9] counters hash, KEYS[10] the new
-- record's address index (noti/core/search.py).
-- ARGV[1] current id ("" = none known), ARGV[2] new id, ARGV[3] created ms, ARGV[4] level,
-- ARGV[5] due ms, ARGV[6] identifier time-to-live (ms), ARGV[7] the new record's "added"
-- counter field (counted when it is stored; a replacement is not a new record),
-- ARGV[8..] new record field/values.
-- The record's timeline (timeline.lua) gets a step: scheduled, or replaced (its content and
-- delay, by a later call under the identifier).
-- Returns {2, id} replaced, {1, id} created, {-1, id} the identifier moved meanwhile (retry).
--#include timeline.lua
local current = redis.call('GET', KEYS[1])
if current and current ~= ARGV[1] then
  return {-1, current}
end
local fields = {}
for i = 8, #ARGV do
  fields[#fields + 1] = ARGV[i]
end
if current then
  local st, claims, not_before, ct = unpack(redis.call('HMGET', KEYS[2], 'noti_st', '_claims', 'noti_timeout_at', 'ct'))
  local score = redis.call('ZSCORE', KEYS[8], current)
  -- untouched: never claimed, and the pump has not taken it (taking re-arms its score)
  if st == '1' and not claims and score and tonumber(score) == tonumber(not_before) then
    redis.call('DEL', KEYS[2])
    redis.call('HSET', KEYS[2], unpack(fields))
    redis.call('HSET', KEYS[2], 'id', current, 'ct', ct)
    redis.call('ZADD', KEYS[7], -tonumber(ARGV[4]), current)
    redis.call('ZADD', KEYS[8], ARGV[5], current)
    redis.call('PEXPIRE', KEYS[1], ARGV[6])
    redis.call('ZADD', KEYS[10], ct, current)
    tl_add(KEYS[2], tl_step(ARGV[3], 'delayed', {['until'] = tonumber(ARGV[5]), why = 'replaced (debounce)'}))
    return {2, current}
  end
end
redis.call('HSET', KEYS[3], unpack(fields))
redis.call('ZADD', KEYS[4], ARGV[3], ARGV[2])
redis.call('ZADD', KEYS[5], ARGV[3], ARGV[2])
redis.call('ZADD', KEYS[6], ARGV[3], ARGV[2])
redis.call('ZADD', KEYS[7], -tonumber(ARGV[4]), ARGV[2])
redis.call('ZADD', KEYS[8], ARGV[5], ARGV[2])
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[6])
redis.call('HINCRBY', KEYS[9], ARGV[7], 1)
redis.call('ZADD', KEYS[10], ARGV[3], ARGV[2])
tl_add(KEYS[3], tl_step(ARGV[3], 'delayed', {['until'] = tonumber(ARGV[5]), why = 'scheduled (debounce)'}))
return {1, ARGV[2]}
