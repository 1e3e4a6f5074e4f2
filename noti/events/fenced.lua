-- The fence of a processor's write (included by outcome.lua, postpone.lua, finish.lua, after
-- `local event_key = KEYS[n]`): nothing is written unless the caller still holds the
-- processor lock (KEYS[1] = ARGV[1]: else -1, the caller stops) and the event is activated
-- (else 0).
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return -1
end
if redis.call('HGET', event_key, 'status') ~= 'activated' then
  return 0
end
