-- Store one new record with its index entries and, when given, its delivery message: one
-- atomic step, so a record and its message land together or not at all.
-- KEYS[1] record, KEYS[2] all index, KEYS[3] creator index, KEYS[4] status index,
-- KEYS[5] waiting index, KEYS[6] delayed set, KEYS[7] the queue list of its message.
-- ARGV[1] id, ARGV[2] created ms, ARGV[3] status, ARGV[4] level, ARGV[5] due ms (0 = now),
-- ARGV[6] the message ("" = none), ARGV[7] the record's fields as a JSON object of strings
-- (one argument instead of thirty keeps the client's encoding cost down).
local fields = {}
for field, value in pairs(cjson.decode(ARGV[7])) do
  fields[#fields + 1] = field
  fields[#fields + 1] = value
end
redis.call('HSET', KEYS[1], unpack(fields))
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[1])
redis.call('ZADD', KEYS[4], ARGV[2], ARGV[1])
if ARGV[3] == '1' then
  redis.call('ZADD', KEYS[5], -tonumber(ARGV[4]), ARGV[1])
  if tonumber(ARGV[5]) > 0 then
    redis.call('ZADD', KEYS[6], ARGV[5], ARGV[1])
  end
end
if ARGV[6] ~= '' then
  redis.call('LPUSH', KEYS[7], ARGV[6])
end
return 1
