-- Store new records with their index entries and, when given, their delivery messages: one
-- atomic step, so a record and its message land together or not at all. Several records
-- per call (seven keys and seven arguments each) keep per-call costs out of bulk sends.
-- Per record r (from 0): KEYS[7r+1] record, +2 all index, +3 creator index, +4 status index,
-- +5 waiting index, +6 delayed set, +7 the queue list of its message.
-- ARGV[7r+1] id, +2 created ms, +3 status, +4 level, +5 due ms (0 = now),
-- +6 the message ("" = none), +7 the record's fields as a JSON object of strings.
-- Returns how many records were stored.
local count = #ARGV / 7
for r = 0, count - 1 do
  local k, a = r * 7, r * 7
  local id, created = ARGV[a + 1], ARGV[a + 2]
  local fields = {}
  for field, value in pairs(cjson.decode(ARGV[a + 7])) do
    fields[#fields + 1] = field
    fields[#fields + 1] = value
  end
  redis.call('HSET', KEYS[k + 1], unpack(fields))
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
end
return count
