-- Record the outcomes of sends, one or many records per call. Fenced: only the lease owner
-- of a waiting record may finish it; each record is judged on its own.
-- KEYS[1] waiting index, KEYS[2] delayed set, KEYS[3..6] status indexes for -1, 0, 1, 10,
-- KEYS[7] dead-letter stream, KEYS[8] counters hash, KEYS[9..] the records.
-- ARGV[1] now (ms), ARGV[2] dead-letter max length, then 9 values per record (in the order
-- of its key): owner, new status, errmsg, not-before (ms; for status 1 the record is
-- re-queued then), retry count, expi ("" = none), JSON object of extra fields to set,
-- JSON object of the dead-letter entry ("" = none), the counters the outcome moves
-- (noti/counters.py: lines "family|labels" or "family|labels<TAB>amount", without the
-- channel, which is the record's own noti_type, put after the family here).
-- Returns one value per record: 1 when applied, 0 when the caller no longer held the lease
-- (then nothing of it is written or counted).
--#include tally.lua
local now, letter_max = ARGV[1], ARGV[2]
local index = {['-1'] = KEYS[3], ['0'] = KEYS[4], ['10'] = KEYS[6]}
-- tallies[channel][tally text] = records applied with it: records of one batch mostly share
-- their text (a provider group's calls took the same time), so each text is parsed once
local out, tallies = {}, {}
for i = 9, #KEYS do
  local key = KEYS[i]
  local a = 3 + (i - 9) * 9
  local owner, new_st, errmsg, not_before = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3]
  local st, held_by, id, kind = unpack(redis.call('HMGET', key, 'noti_st', '_owner', 'id', 'noti_type'))
  if st ~= '1' or held_by ~= owner then
    out[#out + 1] = 0
  else
    redis.call('HSET', key, 'noti_st', new_st, 'noti_errmsg', errmsg, 'noti_timeout_at', not_before,
      'noti_retry', ARGV[a + 4], 'lm', now)
    redis.call('HDEL', key, '_owner', '_inflight')
    if new_st == '10' then -- sent: no earlier attempt is in doubt any more
      redis.call('HDEL', key, '_unsure')
    end
    if ARGV[a + 5] ~= '' then
      redis.call('HSET', key, 'expi', ARGV[a + 5])
    end
    if ARGV[a + 6] ~= '{}' then
      for field, value in pairs(cjson.decode(ARGV[a + 6])) do
        redis.call('HSET', key, field, value)
      end
    end
    if new_st == '1' then
      redis.call('ZADD', KEYS[2], not_before, id)
    else
      redis.call('ZREM', KEYS[1], id)
      redis.call('ZREM', KEYS[5], id)
      redis.call('ZADD', index[new_st], now, id)
    end
    if ARGV[a + 7] ~= '' then
      local entry = {}
      for field, value in pairs(cjson.decode(ARGV[a + 7])) do
        entry[#entry + 1] = field
        entry[#entry + 1] = tostring(value)
      end
      redis.call('XADD', KEYS[7], 'MAXLEN', '~', letter_max, '*', unpack(entry))
    end
    local texts = tallies[kind or '']
    if not texts then
      texts = {}
      tallies[kind or ''] = texts
    end
    texts[ARGV[a + 8]] = (texts[ARGV[a + 8]] or 0) + 1
    out[#out + 1] = 1
  end
end
local counts = {}
for kind, texts in pairs(tallies) do
  local channel = '|' .. kind .. '|'
  for text, records in pairs(texts) do
    for line in string.gmatch(text, '[^\n]+') do
      local family, rest = string.match(line, '^([^|]*)|(.*)$')
      if family then
        local field, amount = string.match(rest, '^(.*)\t(%d+)$')
        if field then
          count(counts, family .. channel .. field, tonumber(amount) * records)
        else
          count(counts, family .. channel .. rest, records)
        end
      end
    end
  end
end
tally_write(KEYS[8], counts)
return out
