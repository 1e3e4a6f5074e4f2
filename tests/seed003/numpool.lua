-- A seed-003 client's own script, written from the seed's text alone (not from noti's):
-- EVALSHA sha 1 {numpool} event [number]; state JSON {callstate, regstate} in
-- KEYS[1]:numstate, free numbers in the LIST KEYS[1]:idle:up; answers "1" / "0", and the
-- number for call. It rewrites the JSON with its two fields only, as the seed's sample does.
local state_key, free_key = KEYS[1] .. ':numstate', KEYS[1] .. ':idle:up'
local event, number = ARGV[1], ARGV[2]

local function put(n, c, r)
  redis.call('HSET', state_key, n, cjson.encode({callstate = c, regstate = r}))
end

if event == 'call' and not number then
  number = redis.call('LPOP', free_key)
  if not number then return '0' end
  local st = cjson.decode(redis.call('HGET', state_key, number))
  put(number, 1, st.regstate)
  return number
end

local raw = redis.call('HGET', state_key, number)
if not raw then
  if event == 'add' then put(number, 0, 0) return '1' end
  if event == 'del' then return '1' end
  return '0'
end
local st = cjson.decode(raw)
local c, r = st.callstate, st.regstate
if event == 'add' then return '1' end
if event == 'del' then
  redis.call('HDEL', state_key, number)
  redis.call('LREM', free_key, -1, number)
  return '1'
end
if event == 'reg' then
  if r == 1 then return '1' end
  put(number, c, 1)
  if c == 0 then redis.call('RPUSH', free_key, number) end
  return '1'
end
if event == 'unreg' then
  if r == 0 then return '1' end
  put(number, c, 0)
  redis.call('LREM', free_key, -1, number)
  return '1'
end
if event == 'call' then
  if c == 1 or r == 0 then return '0' end
  put(number, 1, 1)
  redis.call('LREM', free_key, -1, number)
  return number
end
if event == 'hangup' then
  if c == 0 then return '0' end
  put(number, 0, r)
  if r == 1 then redis.call('RPUSH', free_key, number) end
  return '1'
end
return '0'
