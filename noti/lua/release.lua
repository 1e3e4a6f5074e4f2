-- Give back claims a sender made but will not use (the broker transport's fetch claimed a
-- record whose message never reached the batcher): the lease ends now and the claim is no
-- longer counted towards the poison limit, so the redelivered message is sent at once.
-- KEYS: record hashes. ARGV[1] now (ms), ARGV[2..] the owner token of each key.
-- Returns one 1 (given back) or 0 (not ours any more: finished, or taken over) per key.
local out = {}
for i, key in ipairs(KEYS) do
  local st, owner = unpack(redis.call('HMGET', key, 'noti_st', '_owner'))
  if st == '1' and owner == ARGV[i + 1] then
    redis.call('HSET', key, 'noti_timeout_at', ARGV[1])
    redis.call('HINCRBY', key, '_inflight', -1)
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
