-- Take a token from a provider's rate limit, in precedence order: a token bucket shared by
-- every worker (the server's clock), with a line in front of it (noti.providers.ratelimit).
--
-- KEYS[1] bucket  HASH  tokens, ts
-- KEYS[2] line    ZSET  contender (record id) -> precedence; the lowest goes first
-- KEYS[3] back    ZSET  contender -> ms by which it must ask again, or lose its place
-- KEYS[4] clocks  ZSET  user -> that user's clock (ms): where the user's next contender starts
-- ARGV[1] rate (tokens a second)   ARGV[2] burst (bucket size)
-- ARGV[3] contender   ARGV[4] level (1-1000)   ARGV[5] user
-- ARGV[6] hold_ms: the longest wait the contender waits in line for; a longer one, and it
--         leaves the line (it is postponed, and comes back as a newcomer)
-- ARGV[7] linger_ms: how late after its wait a contender may ask again
-- ARGV[8] horizon_ms: how far ahead of now a user's clock may run
-- Returns 0 when a token was taken, else the ms until the contender's turn.
--
-- Precedence: a higher level first; within a level, the user whose clock is earliest. Each
-- contender that joins moves its user's clock one token's time ahead (start-time fair
-- queueing), so a user with many contenders waits behind one with few; ties go by record id
-- (ids sort by age, to the millisecond). The score packs both: (1000 - level) * 2^40 +
-- (start ms - EPOCH), exact in a double until 2057.
local EPOCH, SPAN = 1700000000000, 1099511627776
local rate, burst = tonumber(ARGV[1]), tonumber(ARGV[2])
local contender, level, user = ARGV[3], tonumber(ARGV[4]), ARGV[5]
local hold_ms, linger_ms, horizon_ms = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = math.ceil(burst / rate * 1000) + 1000

-- contenders that did not come back in time lose their place; past clocks mean nothing
local gone = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, 100)
if #gone > 0 then
  redis.call('ZREM', KEYS[2], unpack(gone))
  redis.call('ZREM', KEYS[3], unpack(gone))
end
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)

local tokens, ts = unpack(redis.call('HMGET', KEYS[1], 'tokens', 'ts'))
tokens = tonumber(tokens) or burst
ts = tonumber(ts) or now
tokens = math.min(burst, tokens + math.max(0, now - ts) * rate / 1000)

if not redis.call('ZSCORE', KEYS[2], contender) then
  local start = math.max(tonumber(redis.call('ZSCORE', KEYS[4], user)) or now, now)
  level = math.max(1, math.min(1000, level))
  redis.call('ZADD', KEYS[2], (1000 - level) * SPAN + math.max(0, start - EPOCH), contender)
  local clock = math.min(start + 1000 / rate, now + horizon_ms)
  redis.call('ZADD', KEYS[4], clock, user)
  redis.call('PEXPIRE', KEYS[4], horizon_ms + ttl)
end
local rank = redis.call('ZRANK', KEYS[2], contender)

local wait = 0
if tokens >= rank + 1 then
  tokens = tokens - 1
  redis.call('ZREM', KEYS[2], contender)
  redis.call('ZREM', KEYS[3], contender)
else
  wait = math.ceil((rank + 1 - tokens) * 1000 / rate)
  if wait > hold_ms then
    redis.call('ZREM', KEYS[2], contender)
    redis.call('ZREM', KEYS[3], contender)
  else
    redis.call('ZADD', KEYS[3], now + wait + linger_ms, contender)
    redis.call('PEXPIRE', KEYS[2], hold_ms + linger_ms + ttl)
    redis.call('PEXPIRE', KEYS[3], hold_ms + linger_ms + ttl)
  end
end
redis.call('HSET', KEYS[1], 'tokens', tokens, 'ts', now)
redis.call('PEXPIRE', KEYS[1], ttl)
return wait
