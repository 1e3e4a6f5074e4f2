-- Store new records with their index entries and, when given, their delivery messages: one
-- atomic step, so a record and its message land together or not at all. Several records
-- per call (eight keys each) keep per-call costs out of bulk sends.
-- Per record r (from 0): KEYS[8r+1] record, +2 all index, +3 creator index, +4 status index,
-- +5 waiting index, +6 delayed set, +7 the queue list of its message, +8 its idempotency key
-- (the record key again when it has none).
-- ARGV, per record from offset a (0 for the first): a+1 id, +2 created ms, +3 status,
-- +4 level, +5 due ms (0 = now), +6 the message ("" = none), +7 the idempotency key's
-- time-to-live in ms (0 = no key), +8 n, then the record's n hash fields as name, value
-- pairs (the next record starts at a + 8 + 2n).
-- Returns, per record, the id stored, or the id its idempotency key already names (then
-- nothing of it is written).
local out = {}
local a = 0
for r = 0, #KEYS / 8 - 1 do
  local k = r * 8
  local id, created = ARGV[a + 1], ARGV[a + 2]
  local n = tonumber(ARGV[a + 8])
  local existing = false
  if ARGV[a + 7] ~= '0' then
    existing = redis.call('GET', KEYS[k + 8])
    if not existing then
      redis.call('SET', KEYS[k + 8], id, 'PX', ARGV[a + 7])
    end
  end
  if existing then
    out[r + 1] = existing
  else
    redis.call('HSET', KEYS[k + 1], unpack(ARGV, a + 9, a + 8 + 2 * n))
    redis.call('ZADD', KEYS[k + 2], created, id)
    redis.call('ZADD', KEYS[k + 3], created, id)
    redis.call('ZADD', KEYS[k + 4], created, id)
    if ARGV[a + 3] == '1' then
      redis.call('ZADD', KEYS[k + 5], -tonumber(ARGV[a + 4]), id)
      if tonumber(ARGV[a + 5]) > 0 then
        redis.call('ZADD', KEYS[k + 6], ARGV[a + 5], id)
      end
    end
    if ARGV[a + 6] ~= '' then
      redis.call('LPUSH', KEYS[k + 7], ARGV[a + 6])
    end
    out[r + 1] = id
  end
  a = a + 8 + 2 * n
end
return out
