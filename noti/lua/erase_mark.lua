-- Erasure's first write to the records of an erased recipient (noti/recipients/erasure.py):
-- each record still kept is marked noti_erased, and what masking needs (its channel, target
-- and error text) read in the same step, so a send finishing later writes no words
-- (finish.lua reads the mark) and one that finished before is in the text read. A record
-- gone meanwhile stays gone (no hash is made for it).
-- KEYS: the records. ARGV[1] now (ms).
-- Returns per record {channel, target, error text}, or false when it is gone or was marked
-- already.
local out = {}
for i = 1, #KEYS do
  local kind, target, erased, errmsg =
    unpack(redis.call('HMGET', KEYS[i], 'noti_type', 'noti_target', 'noti_erased', 'noti_errmsg'))
  if kind and not erased then
    redis.call('HSET', KEYS[i], 'noti_erased', ARGV[1])
    out[i] = {kind, target or '', errmsg or ''}
  else
    out[i] = false
  end
end
return out
