-- Store new records with their index entries and, when given, their delivery messages: one
-- atomic step, so a record and its message land together or not at all. Several records
-- per call keep per-call costs out of bulk sends: the records of one call share their
-- creator, status and queue, the hash fields they all have alike are sent once, and each
-- index and the queue get one command for the whole call.
-- KEYS: 1 all index, 2 creator index, 3 status index, 4 waiting index, 5 delayed set,
-- 6 the queue list of the messages (any key when no record has one), 7 the counters hash;
-- then per record r (from 0): KEYS[7+3r+1] the record, KEYS[7+3r+2] its idempotency key
-- (the record key again when it has none), KEYS[7+3r+3] its address's index
-- (noti/core/search.py).
-- ARGV: 1 status, 2 c, then c hash field name, value pairs shared by every record of the
-- call; then per record from offset a: a+1 id, +2 created ms, +3 level, +4 due ms (0 =
-- now), +5 the message ("" = none), +6 the idempotency key's time-to-live in ms (0 = no
-- key), +7 n, +8 its "added" counter field, then the record's own n hash field name, value
-- pairs (the next record starts at a + 8 + 2n).
-- Returns, per record, the id stored, or the id its idempotency key already names (then
-- nothing of it is written, and nothing is counted).
--#include tally.lua
--#include timeline.lua
local waiting = ARGV[1] == '1'
local shared = tonumber(ARGV[2])
local a = 2 + 2 * shared
local out, by_time, by_level, due, messages, counts = {}, {}, {}, {}, {}, {}
for r = 0, (#KEYS - 7) / 3 - 1 do
  local record, key = KEYS[8 + 3 * r], KEYS[9 + 3 * r]
  local id = ARGV[a + 1]
  local n = tonumber(ARGV[a + 7])
  local existing = false
  if ARGV[a + 6] ~= '0' then
    existing = redis.call('GET', key)
    if not existing then
      redis.call('SET', key, id, 'PX', ARGV[a + 6])
    end
  end
  if existing then
    out[r + 1] = existing
  else
    if shared > 0 then
      redis.call('HSET', record, unpack(ARGV, 3, 2 + 2 * shared))
    end
    if n > 0 then
      redis.call('HSET', record, unpack(ARGV, a + 9, a + 8 + 2 * n))
    end
    count(counts, ARGV[a + 8])
    redis.call('ZADD', KEYS[10 + 3 * r], ARGV[a + 2], id)
    by_time[#by_time + 1] = ARGV[a + 2]
    by_time[#by_time + 1] = id
    if waiting then
      by_level[#by_level + 1] = -tonumber(ARGV[a + 3])
      by_level[#by_level + 1] = id
      if ARGV[a + 4] ~= '0' then
        due[#due + 1] = ARGV[a + 4]
        due[#due + 1] = id
        tl_add(record, tl_step(ARGV[a + 2], 'delayed', {['until'] = tonumber(ARGV[a + 4])}))
      end
    end
    if ARGV[a + 5] ~= '' then
      messages[#messages + 1] = ARGV[a + 5]
    end
    out[r + 1] = id
  end
  a = a + 8 + 2 * n
end
if #by_time > 0 then
  redis.call('ZADD', KEYS[1], unpack(by_time))
  redis.call('ZADD', KEYS[2], unpack(by_time))
  redis.call('ZADD', KEYS[3], unpack(by_time))
end
if #by_level > 0 then
  redis.call('ZADD', KEYS[4], unpack(by_level))
end
if #due > 0 then
  redis.call('ZADD', KEYS[5], unpack(due))
end
if #messages > 0 then
  redis.call('LPUSH', KEYS[6], unpack(messages))
end
tally_write(KEYS[7], counts)
return out
