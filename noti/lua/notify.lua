-- notify(recipient=...) calls (noti/recipients/notices.py), one or a batch of them
-- (noti/recipients/bulk.py): per notice, the recipient's preferences checked and the records
-- made in one atomic step, so an opt-out written at the same moment either comes first (the
-- channel is suppressed) or after (the record is made, and the claim checks again before
-- the send: preference.lua): never both, never neither. A batch writes its index entries,
-- queue messages and counters once per key at the end (a notice's own keys are written as
-- it is decided), so a notice costs Redis little more than its records.
-- KEYS: 1 all index, 2 waiting index, 3 delayed set, 4 counters hash, 5 status index 1,
-- 6 status index -1, 7 the categories hash, 8 the digests' due set; then per notice from
-- offset k: k+1 the recipient's hash, +2 the notice's hash, +3 the recipient's log, +4 the
-- notice's idempotency key (the notice key again when none), +5 its records' creator index,
-- +6 the template's hash, +7 the owner's index of open digest windows; then per candidate c
-- (from 0): k+8+6c its record, +9+6c the queue list of its message (any key when it has
-- none), +10+6c the suppression set of its channel, +11+6c the recipient's throttle set of
-- the category on its channel (send times), +12+6c the digest (hash) a throttle that digests
-- puts what is over it into, +13+6c its address's index (noti/core/search.py) (the next
-- notice starts at k + 7 + 6 * candidates).
-- ARGV: 1 now ms, 2 how long a notice is kept (ms; a recipient's log drops older entries; a
-- notice with an idempotency key is kept at least as long as its key), 3 the prefix of digest
-- windows' event lists, 4 how many events a digest window keeps in full; then per notice
-- from offset a: a+1 notice id, +2 its idempotency key's time-to-live in ms ('0': it has
-- none; an idempotency key, a deduplication key or a digest window's), +3 mode ('all': every
-- channel the preferences allow; 'chain': the first allowed, the next one its fallback),
-- +4 category, +5 '1' when the recipient's preferences apply, +6 the fallback's wait in ms
-- (chain), +7 the profile's version the records were made from, +8 the template's stamp
-- ("<current> <ct>"; "\0": a version the caller named, not checked), +9 the category's text
-- ("" = none stored), +10 '1' when quiet hours hold the notice (its records are due when
-- they end), +11 its candidates, +12 the category's throttle limit (0: none), +13 its period
-- in ms, +14 what goes over it ('drop': an invalid record; 'delay': due when it fits;
-- 'digest': into the digest, no record), +15 the notice as a digest event (JSON; "" unless
-- the throttle digests), +16 h, then h field, value pairs of the notice; then per candidate
-- from offset b: b+1 channel, +2 record id, +3 target, +4 the category's default on the
-- channel ('1' on, '0' off), +5 level, +6 due ms (0 = now), +7 its delivery message ("" =
-- none), +8 its "added" counter field, +9 a digest window id for a digest it opens, +10 what
-- that window's notice is made with (JSON; "" unless the throttle digests), +11 n, then its n
-- hash field, value pairs (the next candidate, or notice, starts at b + 11 + 2n).
-- Returns per notice: {0, notice id} when the idempotency key names a notice already; {-1}
-- when the recipient is gone; {-2, doc, version, current, ct, category text} when the
-- profile, the template or the category changed since they were read (nothing of it written:
-- the caller makes the notice again from these); else {1, then per candidate: its state, its
-- record id or ""}. States: queued, held (due when quiet hours end), scheduled (a delay or an
-- eta), throttled (due when the category's throttle lets it through), digested (over the
-- throttle, into its digest: the "record" is the digest window, the notice it will make),
-- fallback (stands by for the one before it), suppressed:<why> (optout: their preference;
-- suppressed: the channel's suppression list; throttled: over the category's throttle; a
-- record made invalid), off (the category is off on the channel for them: no record), unused
-- (the chain had two already: no record).
--#include tally.lua
--#include preference.lua
--#include digest_window.lua
--#include timeline.lua
local now, keep = tonumber(ARGV[1]), tonumber(ARGV[2])
local events_prefix, events_kept = ARGV[3], tonumber(ARGV[4])
local trim_before = '(' .. string.format('%d', now - keep)
local counts, later, pushes, answers = {}, {}, {}, {}
-- the template and category texts compared once per batch
local stamps, declared_of = {}, {}

-- what is written at the end, one command per key: sorted-set entries and queue messages
local function pending(writes, key)
  local entries = writes[key]
  if not entries then
    entries = {}
    writes[key] = entries
  end
  return entries
end

local function add_later(key, score, member)
  local entries = pending(later, key)
  entries[#entries + 1] = score
  entries[#entries + 1] = member
end

local function push_later(key, message)
  local entries = pending(pushes, key)
  entries[#entries + 1] = message
end

-- A category's throttle on one channel of one recipient (tkey: its send times): at the time
-- `at`, is a send over `limit` in any `period`? 'drop' (nothing noted); 'delay' and the first
-- time it fits (noted as a send then); 'digest' and the first time a send fits (nothing noted:
-- the notice goes into the digest, due then); or nil (noted at `at`).
local function throttle(tkey, at, id, limit, period, over)
  redis.call('ZREMRANGEBYSCORE', tkey, '-inf', '(' .. string.format('%d', now - period))
  local from = '(' .. string.format('%d', at - period)
  local n = redis.call('ZCOUNT', tkey, from, '+inf')
  local result = nil
  if n >= limit then
    if over == 'drop' then
      return 'drop', at
    end
    local sends = redis.call('ZRANGEBYSCORE', tkey, from, '+inf', 'WITHSCORES')
    local free = math.max(at, tonumber(sends[2 * (n - limit + 1)]) + period)
    if over == 'digest' then -- nothing is sent now: the digest is due when a send fits
      return 'digest', free
    end
    -- the sends noted from `at - period` on, oldest first: it fits a period after the one
    -- `limit - 1` sends before the last, and after the last
    at = math.max(free, tonumber(sends[2 * n]))
    result = 'delay'
  end
  redis.call('ZADD', tkey, at, id)
  redis.call('PEXPIRE', tkey, at - now + period)
  return result, at
end

-- one notice whose keys start at k and arguments at a; its answer, and where the next starts
local function notice(k, a)
  local notice_id, key_ttl, chain, category = ARGV[a + 1], ARGV[a + 2], ARGV[a + 3] == 'chain', ARGV[a + 4]
  local keyed = key_ttl ~= '0'
  local candidates, h = tonumber(ARGV[a + 11]), tonumber(ARGV[a + 16])
  local limit, period, over = tonumber(ARGV[a + 12]), tonumber(ARGV[a + 13]), ARGV[a + 14]
  local next_k, b = k + 7 + 6 * candidates, a + 16 + 2 * h
  local enforced = ARGV[a + 5] == '1'
  -- the profile's version, and where preferences apply each candidate's own two fields and
  -- the category's and everything's, in one read
  local fields = enforced and {'v', 'p:' .. category .. ':*', 'p:*:*'} or {'v'}
  local skip_b = b
  for _ = 1, candidates do
    if enforced then
      fields[#fields + 1] = 'p:' .. category .. ':' .. ARGV[skip_b + 1]
      fields[#fields + 1] = 'p:*:' .. ARGV[skip_b + 1]
    end
    skip_b = skip_b + 11 + 2 * tonumber(ARGV[skip_b + 11])
  end
  if keyed then
    local existing = redis.call('GET', KEYS[k + 4])
    if existing then
      return {0, existing}, next_k, skip_b
    end
  end
  local rkey = KEYS[k + 1]
  local read = redis.call('HMGET', rkey, unpack(fields))
  local version = read[1]
  if not version and redis.call('HEXISTS', rkey, 'doc') == 0 then
    return {-1}, next_k, skip_b
  end
  local stale = (version or '0') ~= ARGV[a + 7]
  local current, ct = false, false
  if ARGV[a + 8] ~= '\0' then
    local tkey = KEYS[k + 6]
    local stamp = stamps[tkey]
    if not stamp then
      current, ct = unpack(redis.call('HMGET', tkey, 'current', 'ct'))
      stamp = {current or false, ct or false}
      stamps[tkey] = stamp
    end
    current, ct = stamp[1], stamp[2]
    stale = stale or ((current or '') .. ' ' .. (ct or '')) ~= ARGV[a + 8]
  end
  local declared = declared_of[category]
  if declared == nil then
    declared = redis.call('HGET', KEYS[7], category) or false
    declared_of[category] = declared
  end
  stale = stale or (declared or '') ~= ARGV[a + 9]
  if stale then
    return {-2, redis.call('HGET', rkey, 'doc'), version or '0', current, ct, declared}, next_k, skip_b
  end
  local after, quiet = tonumber(ARGV[a + 6]), ARGV[a + 10] == '1'
  local out, made_of, log = {1}, {}, {now, notice_id}
  local picked, primary_key, primary_id, primary_due = 0, nil, nil, 0
  local creator_index = KEYS[k + 5]

  local function store(c, key, id, n, waiting, due, message, errmsg)
    redis.call('HSET', key, unpack(ARGV, b + 12, b + 11 + 2 * n))
    add_later(KEYS[1], now, id)
    add_later(creator_index, now, id)
    add_later(KEYS[k + 13 + 6 * c], now, id)
    log[#log + 1] = now
    log[#log + 1] = id
    if waiting then
      add_later(KEYS[5], now, id)
      add_later(KEYS[2], -tonumber(ARGV[b + 5]), id)
      if due > 0 then
        redis.call('HSET', key, 'noti_timeout_at', string.format('%d', due))
        add_later(KEYS[3], due, id)
      elseif message ~= '' then
        push_later(KEYS[k + 9 + 6 * c], message)
      end
      count(counts, ARGV[b + 8])
    else
      redis.call('HSET', key, 'noti_st', '-1', 'noti_errmsg', errmsg, 'noti_timeout_at', '0')
      add_later(KEYS[6], now, id)
    end
  end

  for c = 0, candidates - 1 do
    local key, channel, id, target = KEYS[k + 8 + 6 * c], ARGV[b + 1], ARGV[b + 2], ARGV[b + 3]
    local n = tonumber(ARGV[b + 11])
    local due = tonumber(ARGV[b + 6])
    local why = nil
    if chain and picked >= 2 then
      why = 'unused'
    elseif redis.call('SISMEMBER', KEYS[k + 10 + 6 * c], target) == 1 then
      why = 'suppressed'
    elseif enforced then
      why = preference_of(read[4 + 2 * c], read[2], read[5 + 2 * c], read[3], ARGV[b + 4])
    elseif ARGV[b + 4] == '0' then
      why = 'off'
    end
    local state, made = nil, ''
    if why == 'optout' or why == 'suppressed' then
      local text = why == 'optout' and 'the recipient opted out of ' .. category .. ' on ' .. channel
        or 'the address is on the ' .. channel .. ' suppression list'
      store(c, key, id, n, false, 0, '', 'e.noti.pref.' .. why .. ': ' .. text)
      tl_add(key, tl_step(now, 'invalid', {code = 'e.noti.pref.' .. why, text = text}))
      count(counts, 'suppressed|' .. category .. '|' .. channel .. '|' .. why)
      state, made = 'suppressed:' .. why, id
    elseif why then
      state = why
    elseif chain and picked == 1 then
      local at = math.max(primary_due, now) + after
      store(c, key, id, n, true, at, '', '')
      redis.call('HSET', key, 'noti_fallback_of', primary_id)
      redis.call('HSET', primary_key, 'noti_fallback', id)
      tl_add(key, tl_step(now, 'held', {reason = 'fallback', ['until'] = at, of = primary_id}))
      picked = 2
      state, made = 'fallback', id
    else
      local throttled, at = nil, due
      if limit > 0 then
        throttled, at = throttle(KEYS[k + 11 + 6 * c], math.max(due, now), id, limit, period, over)
      end
      if throttled == 'digest' then
        local window = digest_put(KEYS[k + 12 + 6 * c], KEYS[8], KEYS[k + 7], ARGV[b + 9], string.format('%d', at),
          ARGV[b + 10], string.format('%d', now), '0', ARGV[a + 15], events_kept, events_prefix)
        count(counts, 'throttled|' .. category .. '|' .. channel .. '|digest')
        state, made = 'digested', window
      elseif throttled == 'drop' then
        store(c, key, id, n, false, 0, '', 'e.noti.pref.throttled: over the ' .. category .. ' throttle on '
          .. channel .. ' (' .. limit .. ' per ' .. (period / 1000) .. ' s)')
        count(counts, 'throttled|' .. category .. '|' .. channel .. '|drop')
        tl_add(key, tl_step(now, 'invalid', {code = 'e.noti.pref.throttled', text = 'over the ' .. category
          .. ' throttle on ' .. channel}))
        state, made = 'suppressed:throttled', id
      else
        if throttled == 'delay' then
          due = at
          count(counts, 'throttled|' .. category .. '|' .. channel .. '|delay')
        end
        store(c, key, id, n, true, due, due > 0 and '' or ARGV[b + 7], '')
        if quiet then
          count(counts, 'held|' .. category .. '|' .. channel)
        end
        picked = picked + 1
        primary_key, primary_id, primary_due = key, id, due
        state = (throttled and 'throttled') or (quiet and 'held') or (due > 0 and 'scheduled') or 'queued'
        if state == 'scheduled' then
          tl_add(key, tl_step(now, 'delayed', {['until'] = due}))
        elseif state ~= 'queued' then
          tl_add(key, tl_step(now, 'held', {reason = state == 'held' and 'quiet hours' or 'throttle',
            ['until'] = due}))
        end
        made = id
      end
    end
    made_of[#made_of + 1] = 'ch:' .. channel
    made_of[#made_of + 1] = state .. ' ' .. made
    out[#out + 1] = state
    out[#out + 1] = made
    b = b + 11 + 2 * n
  end
  for i = a + 17, a + 16 + 2 * h do
    made_of[#made_of + 1] = ARGV[i]
  end
  local nkey = KEYS[k + 2]
  redis.call('HSET', nkey, unpack(made_of))
  redis.call('PEXPIRE', nkey, keyed and math.max(keep, tonumber(key_ttl)) or keep)
  redis.call('ZADD', KEYS[k + 3], unpack(log))
  if string.sub(notice_id, -1) == '0' then -- one notice in 32 trims the log (ids end randomly)
    redis.call('ZREMRANGEBYSCORE', KEYS[k + 3], '-inf', trim_before)
  end
  if keyed then
    redis.call('SET', KEYS[k + 4], notice_id, 'PX', key_ttl)
  end
  return out, next_k, b
end

local k, a = 8, 4
while a < #ARGV do
  local answer
  answer, k, a = notice(k, a)
  answers[#answers + 1] = answer
end
-- Lua's unpack fails near 8,000 values: long lists are written in slices
local function write_all(command, key, values)
  for i = 1, #values, 4000 do
    redis.call(command, key, unpack(values, i, math.min(i + 3999, #values)))
  end
end
for key, entries in pairs(later) do
  write_all('ZADD', key, entries)
end
for key, messages in pairs(pushes) do
  write_all('LPUSH', key, messages)
end
tally_write(KEYS[4], counts)
return answers
