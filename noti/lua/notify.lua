-- One notify(recipient=...) call (noti/recipients/notices.py): the recipient's preferences
-- checked and the records made in one atomic step, so an opt-out written at the same moment
-- either comes first (the channel is suppressed) or after (the record is made, and the claim
-- checks again before the send: preference.lua): never both, never neither.
-- KEYS: 1 the recipient's hash, 2 the notice's hash, 3 the recipient's log, 4 the notice's
-- idempotency key (the notice key again when none), 5 all index, 6 creator index, 7 waiting
-- index, 8 delayed set, 9 counters hash, 10 status index 1, 11 status index -1, 12 the
-- template's hash, 13 the categories hash; then per candidate c (from 0): 14+3c its record,
-- 15+3c the queue list of its message (any key when it has none), 16+3c the suppression set
-- of its channel.
-- ARGV: 1 notice id, 2 now ms, 3 the idempotency key's time-to-live in ms (0 = none), 4 mode
-- ('all': every channel the preferences allow; 'chain': the first allowed, the next one its
-- fallback), 5 category, 6 '1' when the recipient's preferences apply, 7 the fallback's wait
-- in ms (chain), 8 how long the notice is kept (ms; the log drops older entries), 9 the
-- profile's version the records were made from, 10 the template's stamp ("<current> <ct>";
-- "\0": a version the caller named, not checked), 11 the category's text ("" = none stored),
-- 12 '1' when quiet hours hold the notice (its records are due when they end), 13 h, then h
-- field, value pairs of the notice; then per candidate from offset
-- a: a+1 channel, +2 record id, +3 target, +4 the category's default on the channel ('1' on,
-- '0' off), +5 level, +6 due ms (0 = now), +7 its delivery message ("" = none), +8 its
-- "added" counter field, +9 n, then its n hash field, value pairs (next: a + 9 + 2n).
-- Returns {0, notice id} when the idempotency key names a notice already; {-1} when the
-- recipient is gone; {-2, doc, version, current, ct, category text} when the profile, the
-- template or the category changed since they were read (nothing written: the caller makes
-- the notice again from these); else {1, then per candidate: its state, its record id or ""}. States:
-- queued, held (due when quiet hours end), scheduled (a delay or an eta), fallback (stands by
-- for the one before it), suppressed:<why>
-- (optout: their preference; suppressed: the channel's suppression list; a record made
-- invalid), off (the category is off on the channel for them: no record), unused (the
-- chain had two already: no record).
--#include tally.lua
--#include preference.lua
local notice_id, now = ARGV[1], tonumber(ARGV[2])
if ARGV[3] ~= '0' then
  local existing = redis.call('GET', KEYS[4])
  if existing then
    return {0, existing}
  end
end
local doc, version = unpack(redis.call('HMGET', KEYS[1], 'doc', 'v'))
if not doc then
  return {-1}
end
local stale = (version or '0') ~= ARGV[9]
local current, ct = false, false
if ARGV[10] ~= '\0' then
  current, ct = unpack(redis.call('HMGET', KEYS[12], 'current', 'ct'))
  stale = stale or ((current or '') .. ' ' .. (ct or '')) ~= ARGV[10]
end
local declared = redis.call('HGET', KEYS[13], ARGV[5])
stale = stale or (declared or '') ~= ARGV[11]
if stale then
  return {-2, doc, version or '0', current or false, ct or false, declared or false}
end
local chain, category, enforced = ARGV[4] == 'chain', ARGV[5], ARGV[6] == '1'
local after = tonumber(ARGV[7])
local keep = tonumber(ARGV[8])
local quiet = ARGV[12] == '1'
local h = tonumber(ARGV[13])
local a = 13 + 2 * h
local counts, out, log, made_of = {}, {1}, {now, notice_id}, {}
local picked, primary_key, primary_id, primary_due = 0, nil, nil, 0

local function store(r, key, id, n, waiting, due, message, errmsg)
  redis.call('HSET', key, unpack(ARGV, a + 10, a + 9 + 2 * n))
  redis.call('ZADD', KEYS[5], now, id)
  redis.call('ZADD', KEYS[6], now, id)
  log[#log + 1] = now
  log[#log + 1] = id
  if waiting then
    redis.call('ZADD', KEYS[10], now, id)
    redis.call('ZADD', KEYS[7], -tonumber(ARGV[a + 5]), id)
    if due > 0 then
      redis.call('HSET', key, 'noti_timeout_at', string.format('%d', due))
      redis.call('ZADD', KEYS[8], due, id)
    elseif message ~= '' then
      redis.call('LPUSH', KEYS[15 + 3 * r], message)
    end
    count(counts, ARGV[a + 8])
  else
    redis.call('HSET', key, 'noti_st', '-1', 'noti_errmsg', errmsg, 'noti_timeout_at', '0')
    redis.call('ZADD', KEYS[11], now, id)
  end
end

for r = 0, (#KEYS - 13) / 3 - 1 do
  local key, channel, id, target = KEYS[14 + 3 * r], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3]
  local n = tonumber(ARGV[a + 9])
  local due = tonumber(ARGV[a + 6])
  local why = nil
  if chain and picked >= 2 then
    why = 'unused'
  elseif redis.call('SISMEMBER', KEYS[16 + 3 * r], target) == 1 then
    why = 'suppressed'
  elseif enforced then
    why = preference_out(KEYS[1], category, channel, ARGV[a + 4], true)
  elseif ARGV[a + 4] == '0' then
    why = 'off'
  end
  local state, made = nil, ''
  if why == 'optout' or why == 'suppressed' then
    local text = why == 'optout' and 'the recipient opted out of ' .. category .. ' on ' .. channel
      or 'the address is on the ' .. channel .. ' suppression list'
    store(r, key, id, n, false, 0, '', 'e.noti.pref.' .. why .. ': ' .. text)
    count(counts, 'suppressed|' .. category .. '|' .. channel .. '|' .. why)
    state, made = 'suppressed:' .. why, id
  elseif why then
    state = why
  elseif chain and picked == 1 then
    local at = math.max(primary_due, now) + after
    store(r, key, id, n, true, at, '', '')
    redis.call('HSET', key, 'noti_fallback_of', primary_id)
    redis.call('HSET', primary_key, 'noti_fallback', id)
    picked = 2
    state, made = 'fallback', id
  else
    store(r, key, id, n, true, due, ARGV[a + 7], '')
    if quiet then
      count(counts, 'held|' .. category .. '|' .. channel)
    end
    picked = picked + 1
    primary_key, primary_id, primary_due = key, id, due
    state, made = (quiet and 'held') or (due > 0 and 'scheduled') or 'queued', id
  end
  made_of[#made_of + 1] = 'ch:' .. channel
  made_of[#made_of + 1] = state .. ' ' .. made
  out[#out + 1] = state
  out[#out + 1] = made
  a = a + 9 + 2 * n
end
for i = 14, 13 + 2 * h do
  made_of[#made_of + 1] = ARGV[i]
end
redis.call('HSET', KEYS[2], unpack(made_of))
redis.call('PEXPIRE', KEYS[2], keep)
redis.call('ZADD', KEYS[3], unpack(log))
if string.sub(notice_id, -1) == '0' then -- one notice in 32 trims the log (ids end randomly)
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. string.format('%d', now - keep))
end
if ARGV[3] ~= '0' then
  redis.call('SET', KEYS[4], notice_id, 'PX', ARGV[3])
end
tally_write(KEYS[9], counts)
return out
