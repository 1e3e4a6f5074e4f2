-- Activate the event at the head of the arrival queue, for the processor holding the lock.
-- A new event becomes activated; an event already activated (its processor died, or stalled
-- past its lock) is taken again as it is, with tries + 1 and the listener outcomes recorded
-- so far, unless ARGV[5] of the processors that activated it died: then it is poison (it
-- kills its processor), so it is marked done with the error code ARGV[7], a dead letter is
-- appended, and the next event is looked at. A processor that lost its lock while alive
-- (a stall: SIGSTOP, a listener holding the GIL) says so under ARGV[8] .. its name, and is
-- not counted as a death. Entries whose event is gone or done are dropped. First, events whose
-- listener retry back-off has passed (KEYS[9], score = due ms) are moved to the end of the
-- arrival queue, in due order: their retry step is ordered after every event already queued.
-- KEYS[1] processor lock, KEYS[2] arrival queue, KEYS[3] 'new' index,
-- KEYS[4] 'activated' index, KEYS[5] listeners version, KEYS[6] 'done' index,
-- KEYS[7] dead-letter stream, KEYS[8] counters hash (noti/redis/counters.py: events_done|poison),
-- KEYS[9] back-off set.
-- ARGV[1] lock value, ARGV[2] now (ms), ARGV[3] processor name, ARGV[4] event key prefix,
-- ARGV[5] most activations per event (0 = no limit), ARGV[6] dead-letter stream max length,
-- ARGV[7] poison error code, ARGV[8] stall marker prefix.
-- Returns {-1} when the lock is not the caller's, {0, poisoned} when no event waits, else
-- {1, poisoned, id, name, user, payload, created ms, seq, tries, listeners version,
-- recorded outcomes and failed attempts (a flat list: field, value, …: 'o:<listener id>' with
-- an outcome's JSON, 'a:<listener id>' with a count), the listeners to re-run (JSON,
-- '' unless the event was queued again by retry.lua), the return data of its last step};
-- poisoned lists the events set aside as poison in this step, each {id, name, tries,
-- payload, error message}.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return {-1}
end
local max_tries = tonumber(ARGV[5])
local poisoned = {}
local due = redis.call('ZRANGEBYSCORE', KEYS[9], '-inf', ARGV[2], 'LIMIT', 0, 100)
for _, id in ipairs(due) do
  redis.call('ZREM', KEYS[9], id)
  if redis.call('HGET', ARGV[4] .. id, 'status') == 'new' then
    redis.call('HDEL', ARGV[4] .. id, 'retry')
    redis.call('RPUSH', KEYS[2], id)
  end
end
while true do
  local id = redis.call('LINDEX', KEYS[2], 0)
  if not id then
    return {0, poisoned}
  end
  local key = ARGV[4] .. id
  local status = redis.call('HGET', key, 'status')
  local tries = tonumber(redis.call('HGET', key, 'tries') or '0') or 0
  local deaths = 0
  if status == 'activated' and max_tries > 0 and tries >= max_tries then
    for holder in string.gmatch(redis.call('HGET', key, 'holders') or '', '[^\n]+') do
      if redis.call('EXISTS', ARGV[8] .. holder) == 0 then
        deaths = deaths + 1
      end
    end
  end
  if status == 'activated' and max_tries > 0 and deaths >= max_tries then
    local f = redis.call('HMGET', key, 'name', 'payload')
    local died = deaths == tries and 'each time' or (deaths .. ' of those times')
    local message = 'activated ' .. tries .. ' times without finishing: its processor died ' .. died
      .. ' (a listener that kills or exhausts its process?); set aside after'
      .. ' NOTI_EVENT_MAX_TRIES = ' .. max_tries
    redis.call('HSET', key, 'status', 'done', 'done_ms', ARGV[2], 'result', '[]',
      'error_code', ARGV[7], 'error_message', message)
    redis.call('ZREM', KEYS[4], id)
    redis.call('ZADD', KEYS[6], ARGV[2], id)
    redis.call('XADD', KEYS[7], 'MAXLEN', '~', ARGV[6], '*',
      'record_id', id, 'type', 'event:' .. (f[1] or ''), 'target', '', 'attempts', tries,
      'error_class', 'poison', 'errmsg', ARGV[7] .. ': ' .. message, 'at_ms', ARGV[2],
      'source', 'events', 'payload', f[2] or '')
    redis.call('HINCRBY', KEYS[8], 'events_done|poison', 1)
    poisoned[#poisoned + 1] = {id, f[1] or '', tries, f[2] or '', message}
    redis.call('LPOP', KEYS[2])
  elseif status == 'new' or status == 'activated' then
    if status == 'new' then
      redis.call('HSET', key, 'status', 'activated')
      redis.call('ZREM', KEYS[3], id)
      redis.call('ZADD', KEYS[4], redis.call('HGET', key, 'seq'), id)
    end
    local holders = redis.call('HGET', key, 'holders')
    holders = holders and (holders .. '\n' .. ARGV[3]) or ARGV[3]
    redis.call('HSET', key, 'activated_ms', ARGV[2], 'processor', ARGV[3], 'holders', holders)
    tries = redis.call('HINCRBY', key, 'tries', 1)
    local f = redis.call('HMGET', key, 'name', 'user', 'payload', 'created_ms', 'seq')
    local recorded = {}
    if tries > 1 or redis.call('HEXISTS', key, 'waits') == 1 then
      local all = redis.call('HGETALL', key)
      for i = 1, #all, 2 do
        local prefix = string.sub(all[i], 1, 2)
        if prefix == 'o:' or prefix == 'a:' then
          recorded[#recorded + 1] = all[i]
          recorded[#recorded + 1] = all[i + 1]
        end
      end
    end
    local again = redis.call('HMGET', key, 'rerun', 'result')
    return {1, poisoned, id, f[1], f[2], f[3], f[4], f[5], tries, redis.call('GET', KEYS[5]) or '',
      recorded, again[1] or '', again[2] or ''}
  else
    redis.call('LPOP', KEYS[2])
  end
end
