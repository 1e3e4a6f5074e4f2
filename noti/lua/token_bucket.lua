-- Take one token from a provider's bucket (a rate limit shared by every worker).
-- KEYS[1] bucket hash. ARGV[1] rate (tokens per second), ARGV[2] burst (bucket size).
-- Uses the server's clock, so workers with skewed clocks share one limit.
-- Returns 0 when a token was taken, else the ms until one is available.
local rate, burst = tonumber(ARGV[1]), tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local tokens, ts = unpack(redis.call('HMGET', KEYS[1], 'tokens', 'ts'))
tokens = tonumber(tokens) or burst
ts = tonumber(ts) or now
tokens = math.min(burst, tokens + math.max(0, now - ts) * rate / 1000)
local ttl = math.ceil(burst / rate * 1000) + 1000
if tokens >= 1 then
  redis.call('HSET', KEYS[1], 'tokens', tokens - 1, 'ts', now)
  redis.call('PEXPIRE', KEYS[1], ttl)
  return 0
end
redis.call('HSET', KEYS[1], 'tokens', tokens, 'ts', now)
redis.call('PEXPIRE', KEYS[1], ttl)
return math.ceil((1 - tokens) * 1000 / rate)
