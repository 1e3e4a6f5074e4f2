-- One event of the sender-number pool, applied atomically: the state table of seed 003, in
-- the seed's data layout and calling convention, behind noti's owner check.
--
-- The seed's convention (a client that knows nothing of noti):
--
--   EVALSHA sha 1 <base> event [number]        e.g.  EVALSHA sha 1 {numpool} call
--
-- answers the number for call, "1" for any other accepted event, "0" for a refused one (or a
-- call that finds no free number). noti's own calls add ARGV[3..7] and get a table back.
--
-- KEYS[1] <base>: every key below is <base>..':'..part, so all share <base>'s hash tag
--         (noti: <prefix>{numpool:NAME}; the seed: {numpool}) and one cluster slot.
-- ARGV[1] event: add | del | reg | unreg | call | hangup; noti also: show | chown
-- ARGV[2] number; absent or "" with call: take the number free the longest;
--         chown: the new owner; show: ""
-- ARGV[3] noti only: the acting user; "" for noti's own providers (no owner check)
-- ARGV[4] noti only: "1" when the acting user is root: any pool is theirs
-- ARGV[5] noti only, call: a recipient's hash ("" none): its sticky sender number
-- ARGV[6] noti only, call: sticky TTL in ms
-- ARGV[7] noti only, call: lease in ms ("" or "0": none): a number noti calls with a lease is
--         hung up by the first script call after the lease runs out (its worker died)
--
-- Keys (the seed's two, then noti's):
--   <base>:numstate  HASH    number -> JSON {"callstate": 0 idle | 1 busy,
--                                            "regstate": 0 down | 1 up}      (the seed's)
--                             noti adds "lease": the lease's end (ms, Redis clock) while
--                             noti holds the number under a lease; fields it does not know
--                             are kept
--   <base>:idle:up   LIST    free numbers (idle and up), longest free first   (the seed's)
--   <base>:owner     STRING  the user who created the pool (its first add)
--   <base>:leases    ZSET    numbers noti holds under a lease, score = its end (ms)
--   <base>:released  LIST    one token per number that became free: waiting senders BLPOP it
--   <base>:sticky:H  STRING  a recipient's sticky sender number (PX expiry)
--
-- Pools of earlier noti versions stored the state as a string ('idle+up'), the free numbers as
-- a ZSET scored by <base>:seq: the first call of this script rewrites them (migrate()).
--
-- noti's calls return {result, number, state before, state after, hint}: result is 'ok', the
-- refused cell's reason ('unknown', 'idle', 'down', 'busy'; nothing changed), 'empty' (call
-- found no free number; hint: ms until the earliest lease ends, -1 none), 'sticky_busy' (the
-- recipient's sticky number is in a call) or 'nopvg' (the pool is someone else's). show
-- returns {'ok', owner or '', {number, JSON, ...}, {free numbers, next first}}; chown
-- {'ok', new owner, previous owner or '', new owner}.

if redis.replicate_commands then redis.replicate_commands() end  -- Redis < 5: TIME below

-- STATE_TABLE[state][event] = {next state, action, result}, cell by cell as the seed gives it.
-- Actions (the seed's "处理"):
--   keep       return success, change nothing            (返回成功)
--   new        add the number's state                    (增加号码状态)
--   set        modify the number's state                 (修改号码状态)
--   set+free   modify the state, add the free number     (修改号码状态,添加空闲号码)
--   set-free   modify the state, remove the free number  (修改号码状态并删除空闲号码)
--   drop       delete the number's state                 (删除号码状态)
--   drop-free  delete the state and the free number      (删除号码状态并删除空闲号码)
--   refuse     return failure / error, change nothing    (返回失败 / 返回错误)
local STATE_TABLE = {
  ['nodata'] = {
    add    = {'idle+down', 'new',       'ok'},
    del    = {'nodata',    'keep',      'ok'},
    reg    = {'nodata',    'refuse',    'unknown'},
    unreg  = {'nodata',    'refuse',    'unknown'},
    call   = {'nodata',    'refuse',    'unknown'},
    hangup = {'nodata',    'refuse',    'unknown'},
  },
  ['idle+up'] = {
    add    = {'idle+up',   'keep',      'ok'},
    del    = {'nodata',    'drop-free', 'ok'},
    reg    = {'idle+up',   'keep',      'ok'},
    unreg  = {'idle+down', 'set-free',  'ok'},
    call   = {'busy+up',   'set-free',  'ok'},
    hangup = {'idle+up',   'refuse',    'idle'},
  },
  ['idle+down'] = {
    add    = {'idle+down', 'keep',      'ok'},
    del    = {'nodata',    'drop',      'ok'},
    reg    = {'idle+up',   'set+free',  'ok'},
    unreg  = {'idle+down', 'keep',      'ok'},
    call   = {'idle+down', 'refuse',    'down'},
    hangup = {'idle+down', 'refuse',    'idle'},
  },
  ['busy+up'] = {
    add    = {'busy+up',   'keep',      'ok'},
    del    = {'nodata',    'drop',      'ok'},
    reg    = {'busy+up',   'keep',      'ok'},
    unreg  = {'busy+down', 'set',       'ok'},
    call   = {'busy+up',   'refuse',    'busy'},
    hangup = {'idle+up',   'set+free',  'ok'},
  },
  ['busy+down'] = {
    add    = {'busy+down', 'keep',      'ok'},
    del    = {'nodata',    'drop',      'ok'},
    reg    = {'busy+up',   'set',       'ok'},
    unreg  = {'busy+down', 'keep',      'ok'},
    call   = {'busy+down', 'refuse',    'busy'},
    hangup = {'idle+down', 'set',       'ok'},
  },
}
-- The seed's JSON of each state, and back.
local CALLSTATE = {['idle+up'] = 0, ['idle+down'] = 0, ['busy+up'] = 1, ['busy+down'] = 1}
local REGSTATE = {['idle+up'] = 1, ['idle+down'] = 0, ['busy+up'] = 1, ['busy+down'] = 0}
local NAMES = {[0] = {[0] = 'idle+down', [1] = 'idle+up'}, [1] = {[0] = 'busy+down', [1] = 'busy+up'}}

local base = KEYS[1]
local state_key, free_key = base .. ':numstate', base .. ':idle:up'
local owner_key, lease_key, released_key = base .. ':owner', base .. ':leases', base .. ':released'
local event, number = ARGV[1], ARGV[2] or ''
local seed_call = ARGV[3] == nil  -- the seed's convention: no owner, plain answers
local actor, root = ARGV[3] or '', ARGV[4] or '0'

if STATE_TABLE['nodata'][event] == nil and event ~= 'show' and event ~= 'chown' then
  return redis.error_reply('ERR numpool: unknown event ' .. tostring(event))
end

-- A state as the seed stores it, or an earlier noti's string: {name, fields} (nil: nodata).
local function decode(raw)
  if not raw then return nil end
  if string.sub(raw, 1, 1) == '{' then
    local ok, fields = pcall(cjson.decode, raw)
    if ok and type(fields) == 'table' then
      local c, r = tonumber(fields.callstate), tonumber(fields.regstate)
      if NAMES[c] and NAMES[c][r] then return {NAMES[c][r], fields} end
    end
  elseif CALLSTATE[raw] then
    return {raw, {}}
  end
  return redis.error_reply('ERR numpool: a number has an unreadable state ' .. raw)
end

local function encode(name, fields)
  fields.callstate, fields.regstate = CALLSTATE[name], REGSTATE[name]
  return cjson.encode(fields)
end

-- Earlier noti pools: string states, a ZSET of free numbers scored by <base>:seq (made the
-- first time a number became free). Rewritten at once; a state string left in a pool that
-- never had a free number is read as it is and rewritten by the number's next change.
local function migrate()
  if redis.call('EXISTS', base .. ':seq') == 0 and redis.call('TYPE', free_key)['ok'] ~= 'zset' then
    return
  end
  if redis.call('TYPE', free_key)['ok'] == 'zset' then
    local free = redis.call('ZRANGE', free_key, 0, -1)
    redis.call('DEL', free_key)
    for i = 1, #free, 1000 do
      redis.call('RPUSH', free_key, unpack(free, i, math.min(i + 999, #free)))
    end
  end
  local flat = redis.call('HGETALL', state_key)
  for i = 1, #flat, 2 do
    if string.sub(flat[i + 1], 1, 1) ~= '{' then
      local st = decode(flat[i + 1])
      if st and st.err then return st end
      redis.call('HSET', state_key, flat[i], encode(st[1], st[2]))
    end
  end
  redis.call('DEL', base .. ':seq')
end

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function free(n)
  redis.call('RPUSH', free_key, n)
  redis.call('LPUSH', released_key, n)  -- wakes one waiting sender
  redis.call('LTRIM', released_key, 0, 255)
  redis.call('PEXPIRE', released_key, 60000)
end

-- Hang up the numbers whose noti lease ran out (their worker died mid-send). A number some
-- other client moved meanwhile has lost its "lease" field, and is left alone.
local function reclaim(now)
  local due = redis.call('ZRANGEBYSCORE', lease_key, '-inf', now, 'WITHSCORES', 'LIMIT', 0, 32)
  for i = 1, #due, 2 do
    local n, ends = due[i], tonumber(due[i + 1])
    local st = decode(redis.call('HGET', state_key, n))
    if st and st.err then return st end
    if st and tonumber(st[2].lease) == ends and CALLSTATE[st[1]] == 1 then
      local after = (REGSTATE[st[1]] == 1) and 'idle+up' or 'idle+down'
      st[2].lease = nil
      redis.call('HSET', state_key, n, encode(after, st[2]))
      if after == 'idle+up' then free(n) end
    end
    redis.call('ZREM', lease_key, n)
  end
end

local function answer(result, n, before, after, hint)
  if not seed_call then return {result, n, before, after, hint or -1} end
  if result ~= 'ok' then return '0' end
  if event == 'call' then return n end
  return '1'
end

local err = migrate()
if err then return err end
local now = now_ms()
err = reclaim(now)
if err then return err end

-- The owner check, before anything is read or written for the caller.
local owner = redis.call('GET', owner_key)
local fresh = not owner and redis.call('EXISTS', state_key, free_key) == 0
if actor ~= '' and root ~= '1' and owner ~= actor and not fresh then
  return {'nopvg', number, owner or '', '', -1}
end

if event == 'show' then
  return {'ok', owner or '', redis.call('HGETALL', state_key), redis.call('LRANGE', free_key, 0, -1)}
end
if event == 'chown' then
  redis.call('SET', owner_key, number)
  return {'ok', number, owner or '', number}
end
if fresh and actor ~= '' and event == 'add' then
  redis.call('SET', owner_key, actor)  -- the pool's first add makes it the acting user's
end

local function state_of(n)
  local st = decode(redis.call('HGET', state_key, n))
  if st and st.err then error(st.err) end
  if not st then return 'nodata', {} end
  return st[1], st[2]
end

local sticky_key = nil
if event == 'call' and (ARGV[5] or '') ~= '' then
  sticky_key = base .. ':sticky:' .. ARGV[5]
end

if event == 'call' and number == '' then
  if sticky_key then
    local held = redis.call('GET', sticky_key)
    if held then
      local st = state_of(held)
      if st == 'idle+up' then
        number = held
      elseif st == 'busy+up' then
        return answer('sticky_busy', held, st, st)
      end
      -- down or deleted: the recipient gets a new sender number below
    end
  end
  while number == '' do
    -- The head of the free list is the number that has been free the longest.
    local head = redis.call('LINDEX', free_key, 0)
    if not head then
      local first = redis.call('ZRANGE', lease_key, 0, 0, 'WITHSCORES')
      local hint = first[2] and math.max(0, tonumber(first[2]) - now) or -1
      -- no number is free now, so every wake-up token left is stale: a waiter that blocks
      -- next is woken by the next release, not at once by an old one (and does not spin)
      redis.call('DEL', released_key)
      return answer('empty', '', 'nodata', 'nodata', hint)
    end
    if state_of(head) == 'idle+up' then
      number = head
    else
      redis.call('LPOP', free_key)  -- listed but not free (another client's slip): drop it
    end
  end
end

local before, fields = state_of(number)
local row = STATE_TABLE[before][event]
local after, action = row[1], row[2]

if after ~= before and (event == 'hangup' or event == 'del') then
  fields.lease = nil
  redis.call('ZREM', lease_key, number)
end
local lease_ms = tonumber(ARGV[7] or '') or 0
if event == 'call' and row[3] == 'ok' and lease_ms > 0 then
  fields.lease = now + lease_ms
  redis.call('ZADD', lease_key, fields.lease, number)
end

if action == 'new' or action == 'set' then
  redis.call('HSET', state_key, number, encode(after, fields))
elseif action == 'set+free' then
  redis.call('HSET', state_key, number, encode(after, fields))
  free(number)
elseif action == 'set-free' then
  redis.call('HSET', state_key, number, encode(after, fields))
  redis.call('LREM', free_key, 1, number)
elseif action == 'drop' then
  redis.call('HDEL', state_key, number)
elseif action == 'drop-free' then
  redis.call('HDEL', state_key, number)
  redis.call('LREM', free_key, 1, number)
end

if sticky_key and row[3] == 'ok' then
  redis.call('SET', sticky_key, number, 'PX', ARGV[6])
end
return answer(row[3], number, before, after)
