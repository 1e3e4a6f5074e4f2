-- Apply vendors' delivery reports to records, forward-only (noti/delivery/state.py): a report
-- applies only above the record's delivery rank (accepted 1, unknown 2, delivered and
-- undelivered 3), so a late "accepted" or a duplicate changes nothing and the first final
-- word stays. A "delivered" cancels the record's fallback while it still waits untouched; an
-- "undelivered" makes it due now. A record that asked for status callbacks gets the change
-- written to the status-change stream.
-- A vendor's report speaks only for a message its provider sent: it applies (and moves the
-- fallback) only to a record that is sent (status 10), through the report's provider, under
-- the report's vendor id (the id that send returned: another account's message, or a forged
-- one, has another), and that is the record the report names, if it names one. A report
-- naming a record not sent yet is not applied to it ('unsent'); when it carries a vendor id
-- it is kept under "<provider>:<vendor id>" (early_keep.lua), so that it applies once that
-- very send is recorded (finish.lua) and never to a send by anyone else.
-- KEYS[1..4] delivery indexes accepted, delivered, undelivered, unknown, KEYS[5] receipt
-- watch, KEYS[6] status-change stream, KEYS[7] delayed set, KEYS[8] waiting index, KEYS[9]
-- status index of -1, KEYS[10] status index of 1, KEYS[11] counters hash, KEYS[12] early
-- receipts, KEYS[13] their ages, then two keys per report: its record, and the record's
-- fallback (or the record again when it has none).
-- ARGV[1] now (ms), ARGV[2] status-change stream max length, ARGV[3] most receipts kept,
-- ARGV[4] their lifetime (ms), then 11 values per report: state, vendor code, vendor text,
-- when (ms; 0 = now), provider, 1 when the second key is a fallback, the early-receipt field
-- it came from ("" = none; removed once applied), 1 when it is a vendor's word (checked as
-- above; "" = noti's own: the sweep's unknown), the vendor id ("" = none), the record id the
-- report names ("" = none), the report's JSON (kept when it names a record not sent yet).
-- Returns per report: 'applied', 'stale' (not above the record's status), 'gone' (no such
-- record), 'unsent' (the record is not sent yet: refused for it, kept under its vendor id) or
-- 'foreign' (the record was sent through another provider, or under another vendor id, or is
-- not the record the report names: a receipt key of one provider or account never speaks for
-- the messages of another).
--#include tally.lua
--#include timeline.lua
--#include standby.lua
--#include early_keep.lua
local now, changes_max, early_max, early_ttl = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local rank = {accepted = 1, unknown = 2, delivered = 3, undelivered = 3}
local index = {accepted = KEYS[1], delivered = KEYS[2], undelivered = KEYS[3], unknown = KEYS[4]}
local out, counts, trimmed = {}, {}, false
-- the field a record's vendor message id is kept in (noti/core/record.py: msgid_field)
local function msgid_of(key, kind)
  return redis.call('HGET', key, kind == 'weixin' and 'noti_wx_tmpl_msgid' or 'noti_' .. (kind or '') .. '_msgid')
end
for r = 0, (#KEYS - 13) / 2 - 1 do
  local key, fallback_key = KEYS[14 + 2 * r], KEYS[15 + 2 * r]
  local a = 5 + 11 * r
  local state, code, text, at, provider, has_fallback, early =
    ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5], ARGV[a + 6]
  local vendors, vid, named = ARGV[a + 7] == '1', ARGV[a + 8], ARGV[a + 9]
  if at == '0' then
    at = now
  end
  local id, current, kind, cb, by, st, erased = unpack(redis.call('HMGET', key, 'id', 'noti_dlv', 'noti_type',
    'noti_status_cb', 'noti_sent_by', 'noti_st', 'noti_erased'))
  if erased then -- its recipient was erased: the vendor's words may quote the address
    text = tl_unworded(text)
  end
  if not id then
    out[#out + 1] = 'gone'
    count(counts, 'receipts|gone|' .. provider)
  elseif vendors and (st ~= '10' or not by) then -- not sent: no vendor has a word on it yet
    if vid ~= '' and early == '' and not erased then -- unless its send is being recorded (or
      -- its recipient was erased: it is never sent, and the receipt's words are not kept)
      if not trimmed then
        early_trim(KEYS[12], KEYS[13], now, early_ttl)
        trimmed = true
      end
      early_keep(KEYS[12], KEYS[13], provider .. ':' .. vid, ARGV[a + 10], now, early_max)
    end
    out[#out + 1] = 'unsent'
    count(counts, 'receipts|unsent|' .. provider)
  elseif (by and by ~= provider) -- only the provider that took the message speaks of it,
    or (vendors and ((msgid_of(key, kind) or '') ~= vid or (named ~= '' and named ~= id))) then
    out[#out + 1] = 'foreign' -- and only of the message its send returned the id of
    count(counts, 'receipts|foreign|' .. provider)
  elseif rank[state] <= (rank[current or ''] or 0) then
    out[#out + 1] = 'stale'
    count(counts, 'receipts|stale|' .. provider)
  else
    redis.call('HSET', key, 'noti_dlv', state, 'noti_dlv_at', at, 'noti_dlv_' .. state .. '_at', at)
    tl_add(key, tl_step(now, 'receipt', {state = state, provider = provider, code = code, text = text,
      vendor_at = tonumber(at), vendor = vendors}))
    if rank[state] == 3 then
      redis.call('HSET', key, 'noti_dlv_code', code, 'noti_dlv_text', text)
    end
    if current then
      redis.call('ZREM', index[current], id)
    end
    redis.call('ZADD', index[state], now, id)
    if state ~= 'accepted' then
      redis.call('ZREM', KEYS[5], id)
    end
    if has_fallback == '1' and rank[state] >= 2 then
      local fid = standby_free(fallback_key, now)
      if fid and state == 'delivered' then
        redis.call('HSET', fallback_key, 'noti_st', '-1', 'noti_timeout_at', 0, 'lm', now,
          'noti_errmsg', 'e.noti.fallback.unneeded: ' .. id .. ' was delivered')
        redis.call('HDEL', fallback_key, '_owner', '_inflight')
        redis.call('ZREM', KEYS[8], fid)
        redis.call('ZREM', KEYS[7], fid)
        redis.call('ZREM', KEYS[10], fid)
        redis.call('ZADD', KEYS[9], now, fid)
        count(counts, 'fallbacks|' .. (kind or '') .. '|cancelled')
        tl_add(fallback_key, tl_step(now, 'fallback', {why = 'cancelled: ' .. id .. ' was delivered'}))
        tl_add(key, tl_step(now, 'fallback', {record = fid, why = 'cancelled: delivered'}))
      elseif fid and state == 'undelivered' then -- the pump queues it on its next round
        if standby_now(KEYS[7], fallback_key, fid, now) then
          tl_add(key, tl_step(now, 'fallback', {record = fid, why = 'due now: undelivered'}))
        end
      end
    end
    if cb then
      redis.call('XADD', KEYS[6], 'MAXLEN', '~', changes_max, '*', 'id', id, 'status', 'sent',
        'delivery', state, 'at', at, 'code', code, 'text', text)
    end
    count(counts, 'delivery|' .. (kind or '') .. '|' .. state .. '|' .. provider)
    count(counts, 'receipts|applied|' .. provider)
    out[#out + 1] = 'applied'
  end
  if early ~= '' then -- a kept receipt is taken once, whatever it found
    redis.call('HDEL', KEYS[12], early)
    redis.call('ZREM', KEYS[13], early)
  end
end
tally_write(KEYS[11], counts)
return out
