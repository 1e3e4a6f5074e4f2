-- Extend the lease of records a sender still works on (a heartbeat during a slow send).
-- KEYS: record hashes. ARGV[1] new lease end (ms), ARGV[2..] the owner token of each key.
-- Returns one 1 (extended) or 0 (lease lost: finished, or taken over) per key.
local out = {}
for i, key in ipairs(KEYS) do
  local st, owner = unpack(redis.call('HMGET', key, 'noti_st', '_owner'))
  if st == '1' and owner == ARGV[i + 1] then
    redis.call('HSET', key, 'noti_timeout_at', ARGV[1])
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
