-- Authenticate one HTTP API request by its token's digest (noti.access.tokens), and take one
-- request from the token's rate limit: a token bucket of burst max(1, ceil(rate)) kept in
-- the token's own hash, on the Redis server's clock (every API process shares it). An
-- expired token is told by the same clock, and neither takes from the bucket nor counts as
-- used.
-- KEYS[1] the token's hash (noti:token:<sha256>)
-- Returns {0} no such token, {-1} revoked, {-3, expiry ms} expired, {-2, ms until a request
-- is let in} over its rate, or {1, user, level cap ('' = none), rate ('' = none), providers
-- (comma-separated; '' = no restriction)}.
local user, cap, rate, revoked, tokens, at, used, expires, providers =
  unpack(redis.call('HMGET', KEYS[1], 'user', 'cap', 'rate', 'revoked_ms', 'bt', 'bts', 'used_ms',
    'expires_ms', 'providers'))
if not user then
  return {0}
end
if revoked and revoked ~= '' then
  return {-1}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if expires and expires ~= '' and now >= tonumber(expires) then
  return {-3, expires}
end
if rate and rate ~= '' then
  local per_s = tonumber(rate)
  local burst = math.max(1, math.ceil(per_s))
  local have = tonumber(tokens) or burst
  local since = tonumber(at) or now
  if now > since then
    have = math.min(burst, have + (now - since) * per_s / 1000)
  end
  if have < 1 then
    return {-2, math.ceil((1 - have) / per_s * 1000)}
  end
  redis.call('HSET', KEYS[1], 'bt', tostring(have - 1), 'bts', now)
end
-- when it was last used, to the second: a write per second at most, not per request
if (tonumber(used) or 0) + 1000 <= now then
  redis.call('HSET', KEYS[1], 'used_ms', now)
end
return {1, user, cap or '', rate or '', providers or ''}
