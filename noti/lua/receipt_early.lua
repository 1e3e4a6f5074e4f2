-- Keep receipts that name only a vendor id noti has not recorded yet (the vendor answered
-- the send and pushed the receipt before the worker recorded the send): each is kept under
-- "<provider>:<vendor id>" until finish.lua records that id and hands it back, or until the
-- sweep drops it (NOTI_RECEIPT_WINDOW_S). A vendor id recorded meanwhile is answered instead.
-- KEYS[1] vendor ids, KEYS[2] early receipts, KEYS[3] their ages, KEYS[4] counters hash.
-- ARGV[1] now (ms), then per receipt: its field, its JSON, its provider.
-- Returns per receipt: the record id now known for it, or '' when it was kept.
local out = {}
for a = 2, #ARGV, 3 do
  local field = ARGV[a]
  local id = redis.call('HGET', KEYS[1], field)
  if id then
    out[#out + 1] = id
  else
    local kept = redis.call('HGET', KEYS[2], field)
    -- of two receipts for one message, the final one is kept (forward-only, as on the record)
    if not kept or string.find(kept, '"state":"accepted"', 1, true) then
      redis.call('HSET', KEYS[2], field, ARGV[a + 1])
      redis.call('ZADD', KEYS[3], ARGV[1], field)
    end
    redis.call('HINCRBY', KEYS[4], 'receipts|early|' .. ARGV[a + 2], 1)
    out[#out + 1] = ''
  end
end
return out
