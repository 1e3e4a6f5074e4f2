-- Record the outcomes of sends, one or many records per call. Fenced: only the lease owner
-- of a waiting record may finish it; each record is judged on its own.
-- KEYS[1] waiting index, KEYS[2] delayed set, KEYS[3..6] status indexes for -1, 0, 1, 10,
-- KEYS[7] dead-letter stream, KEYS[8] counters hash, then the delivery keys (noti/delivery):
-- KEYS[9] receipt watch, KEYS[10] vendor ids, KEYS[11] their ages, KEYS[12] early receipts,
-- KEYS[13] status-change stream, KEYS[14] delivery index accepted, KEYS[15] delivered,
-- KEYS[16..] the records.
-- ARGV[1] now (ms), ARGV[2] dead-letter max length, ARGV[3] ms after which a sent record that
-- awaits a receipt is marked unknown, ARGV[4] status-change stream max length, then 9 values
-- per record (in the order
-- of its key): owner, new status, errmsg, not-before (ms; for status 1 the record is
-- re-queued then), retry count, expi ("" = none), JSON object of extra fields to set,
-- JSON object of the dead-letter entry ("" = none), the counters the outcome moves
-- (noti/redis/counters.py: lines "family|labels" or "family|labels<TAB>amount", without the
-- channel, which is the record's own noti_type, put after the family here), then the steps
-- its timeline gets (noti/core/timeline.py: JSON texts, one per line; "" = none).
-- A record sent with a delivery status among its fields (noti_dlv: accepted, or delivered for
-- providers whose answer is the delivery) enters that status' index; an accepted one awaits
-- its receipt in the watch, its vendor id noted to match the receipt. A record that asked
-- for status callbacks (noti_status_cb) gets its change written to the status-change stream.
-- Returns one value per record: 1 when applied, 0 when the caller no longer held the lease
-- (then nothing of it is written or counted), or the JSON of a receipt that came before the
-- send was recorded (applied: the caller applies the receipt now); 2 when applied to a
-- record whose recipient was erased while it was sent (written without the address or the
-- vendor's words: the caller's hooks get it masked too), {2, that JSON} when both.
--#include tally.lua
--#include timeline.lua
local now, letter_max, unknown_after, changes_max = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local index = {['-1'] = KEYS[3], ['0'] = KEYS[4], ['10'] = KEYS[6]}
-- tallies[channel][tally text] = records applied with it: records of one batch mostly share
-- their text (a provider group's calls took the same time), so each text is parsed once
local out, tallies = {}, {}
for i = 16, #KEYS do
  local key = KEYS[i]
  local a = 5 + (i - 16) * 10
  local owner, new_st, errmsg, not_before = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3]
  local st, held_by, id, kind, prior_dlv, cb, erased = unpack(redis.call('HMGET', key, 'noti_st', '_owner', 'id',
    'noti_type', 'noti_dlv', 'noti_status_cb', 'noti_erased'))
  if st ~= '1' or held_by ~= owner then
    out[#out + 1] = 0
  else
    local steps, letter = ARGV[a + 9], ARGV[a + 7]
    if erased then -- its recipient was erased while it was sent: no words, no address kept
      errmsg, steps = tl_unworded(errmsg), tl_unworded_lines(steps)
      if letter ~= '' then
        local entry = cjson.decode(letter)
        entry.target = redis.call('HGET', key, 'noti_target') or ''
        if entry.errmsg then
          entry.errmsg = tl_unworded(entry.errmsg)
        end
        letter = cjson.encode(entry)
      end
    end
    -- the new state with its expiry, if any, in one call; then the claim's fields go
    if ARGV[a + 5] == '' then
      redis.call('HSET', key, 'noti_st', new_st, 'noti_errmsg', errmsg, 'noti_timeout_at', not_before,
        'noti_retry', ARGV[a + 4], 'lm', now)
    else
      redis.call('HSET', key, 'noti_st', new_st, 'noti_errmsg', errmsg, 'noti_timeout_at', not_before,
        'noti_retry', ARGV[a + 4], 'lm', now, 'expi', ARGV[a + 5])
    end
    if new_st == '10' then -- sent: no earlier attempt is in doubt any more
      redis.call('HDEL', key, '_owner', '_inflight', '_unsure')
    else
      redis.call('HDEL', key, '_owner', '_inflight')
    end
    -- the outcome's fields, written in one call; the send's delivery status, provider and
    -- vendor id are read from them (not back from the record)
    local dlv, by, msgid
    if ARGV[a + 6] ~= '{}' then
      local set = {}
      for field, value in pairs(cjson.decode(ARGV[a + 6])) do
        if field == 'noti_dlv' then
          dlv = value
        elseif field == 'noti_sent_by' then
          by = value
        elseif string.sub(field, -6) == '_msgid' then
          msgid = value
        end
        -- a delivery status set before the send (only versions before issue 32 applied a
        -- receipt to a record not sent; delivery.lua keeps such a receipt for the send now):
        -- left as it is, forward-only, its index with it
        if not (prior_dlv and (field == 'noti_dlv' or field == 'noti_dlv_at')) then
          set[#set + 1] = field
          set[#set + 1] = value
        end
      end
      if #set > 0 then
        redis.call('HSET', key, unpack(set))
      end
    end
    local result = 1
    if new_st == '10' then
      if prior_dlv then -- its index and the watch are the receipt's doing already
        dlv = prior_dlv
      elseif dlv == 'accepted' then
        redis.call('ZADD', KEYS[14], now, id)
        redis.call('ZADD', KEYS[9], tonumber(now) + unknown_after, id)
      elseif dlv == 'delivered' then
        redis.call('ZADD', KEYS[15], now, id)
      end
      if msgid and by and dlv ~= 'delivered' then -- the vendor's id, to match its receipts
        local vid = by .. ':' .. msgid
        redis.call('HSET', KEYS[10], vid, id)
        redis.call('ZADD', KEYS[11], now, vid)
        local early = redis.call('HGET', KEYS[12], vid)
        if early then
          result = early
        end
      end
      if cb then
        redis.call('XADD', KEYS[13], 'MAXLEN', '~', changes_max, '*', 'id', id, 'status', 'sent',
          'delivery', dlv or '', 'at', now)
      end
    elseif new_st ~= '1' and cb then
      redis.call('XADD', KEYS[13], 'MAXLEN', '~', changes_max, '*', 'id', id,
        'status', new_st == '0' and 'failed' or 'invalid', 'at', now, 'text', errmsg)
    end
    if new_st == '1' then
      redis.call('ZADD', KEYS[2], not_before, id)
    else
      redis.call('ZREM', KEYS[1], id)
      redis.call('ZREM', KEYS[5], id)
      redis.call('ZADD', index[new_st], now, id)
    end
    if letter ~= '' then
      local entry = {}
      for field, value in pairs(cjson.decode(letter)) do
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
    if steps ~= '' then
      tl_add_lines(key, steps)
    end
    if erased then -- the caller's hooks are to see it masked; an early receipt is still applied
      result = result == 1 and 2 or {2, result}
    end
    out[#out + 1] = result
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
