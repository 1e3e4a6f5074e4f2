-- One event of the sender-number pool, applied atomically: the state table of seed 003,
-- behind the pool's owner check.
--
-- KEYS[1] <prefix>{numpool:NAME}:numstate   HASH    number -> state
-- KEYS[2] <prefix>{numpool:NAME}:idle:up    ZSET    free numbers (idle and up), score = free order
-- KEYS[3] <prefix>{numpool:NAME}:seq        STRING  counter that gives the free set its scores
-- KEYS[4] <prefix>{numpool:NAME}:owner      STRING  the user who created the pool
-- KEYS[5] <prefix>{numpool:NAME}:sticky:H   STRING  optional, call only: a recipient's sender number
-- ARGV[1] event: add | del | reg | unreg | call | hangup; or show (read the pool) or chown
-- ARGV[2] number; "" with call: take the free number that has been free the longest;
--         chown: the new owner; show: ""
-- ARGV[3] the acting user; "" for noti's own providers (the operator's sender_pool): no check
-- ARGV[4] "1" when the acting user is a root member or administrator: any pool is theirs
-- ARGV[5] sticky TTL in ms (with KEYS[5])
--
-- Who may: the pool's owner and root; a pool nobody has made yet is anyone's to create (its
-- first add makes the acting user its owner); a pool made before pools had owners (keys but
-- no owner) is root's only until chown gives it one. A refusal changes nothing and returns
-- {'nopvg', number, owner or '', ''}. Callers check that the user may chown before asking.
--
-- Returns {result, number, state before, state after}. result is 'ok', the refused cell's
-- reason ('unknown', 'idle', 'down', 'busy'; nothing changed), 'empty' (call found no free
-- number) or 'sticky_busy' (the recipient's sticky number is in a call). show returns
-- {'ok', owner or '', {number, state, ...}, {free numbers, next first}}; chown
-- {'ok', new owner, previous owner or '', new owner}.
--
-- Every key shares the hash tag {numpool:NAME}, so the script runs on Redis Cluster.

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

local state_key, free_key, seq_key, owner_key, sticky_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local event, number, actor, root = ARGV[1], ARGV[2], ARGV[3], ARGV[4]

if STATE_TABLE['nodata'][event] == nil and event ~= 'show' and event ~= 'chown' then
  return redis.error_reply('ERR numpool: unknown event ' .. tostring(event))
end

-- The owner check, before anything is read or written for the caller.
local owner = redis.call('GET', owner_key)
local fresh = not owner and redis.call('EXISTS', state_key, seq_key) == 0
if actor ~= '' and root ~= '1' and owner ~= actor and not fresh then
  return {'nopvg', number, owner or '', ''}
end

if event == 'show' then
  return {'ok', owner or '', redis.call('HGETALL', state_key), redis.call('ZRANGE', free_key, 0, -1)}
end
if event == 'chown' then
  redis.call('SET', owner_key, number)
  return {'ok', number, owner or '', number}
end
if fresh and actor ~= '' and event == 'add' then
  redis.call('SET', owner_key, actor)  -- the pool's first add makes it the acting user's
end

local function state_of(n)
  return redis.call('HGET', state_key, n) or 'nodata'
end

if event == 'call' and number == '' then
  if sticky_key then
    local held = redis.call('GET', sticky_key)
    if held then
      local st = state_of(held)
      if st == 'idle+up' then
        number = held
      elseif st == 'busy+up' then
        return {'sticky_busy', held, st, st}
      end
      -- down or deleted: the recipient gets a new sender number below
    end
  end
  if number == '' then
    -- The head of the free set is the number that has been free the longest.
    local head = redis.call('ZRANGE', free_key, 0, 0)[1]
    if not head then
      return {'empty', '', 'nodata', 'nodata'}
    end
    number = head
  end
end

local before = state_of(number)
local row = STATE_TABLE[before] and STATE_TABLE[before][event]
if not row then
  return redis.error_reply('ERR numpool: number ' .. number .. ' has an unknown state ' .. before)
end
local after, action = row[1], row[2]

if action == 'new' or action == 'set' then
  redis.call('HSET', state_key, number, after)
elseif action == 'set+free' then
  redis.call('HSET', state_key, number, after)
  redis.call('ZADD', free_key, redis.call('INCR', seq_key), number)
elseif action == 'set-free' then
  redis.call('HSET', state_key, number, after)
  redis.call('ZREM', free_key, number)
elseif action == 'drop' then
  redis.call('HDEL', state_key, number)
elseif action == 'drop-free' then
  redis.call('HDEL', state_key, number)
  redis.call('ZREM', free_key, number)
end

if sticky_key and event == 'call' and row[3] == 'ok' then
  redis.call('SET', sticky_key, number, 'PX', ARGV[5])
end
return {row[3], number, before, after}
