-- Keep receipts that name only a vendor id noti has not recorded yet (the vendor answered
-- the send and pushed the receipt before the worker recorded the send): each is kept under
-- "<provider>:<vendor id>" until finish.lua records that very id for a send through that
-- provider and hands it back, or until its lifetime ends (early_keep.lua: bounded in number
-- and lifetime). A vendor id recorded meanwhile is answered instead.
-- KEYS[1] vendor ids, KEYS[2] early receipts, KEYS[3] their ages, KEYS[4] counters hash.
-- ARGV[1] now (ms), ARGV[2] most receipts kept, ARGV[3] their lifetime (ms), then per
-- receipt: its field, its JSON, its provider.
-- Returns per receipt: the record id now known for it, '' when it was kept, or 0 when it was
-- not (the table is full: dropped).
--#include early_keep.lua
local now, max = ARGV[1], ARGV[2]
early_trim(KEYS[2], KEYS[3], now, ARGV[3])
local out = {}
for a = 4, #ARGV, 3 do
  local field = ARGV[a]
  local id = redis.call('HGET', KEYS[1], field)
  if id then
    out[#out + 1] = id
  elseif early_keep(KEYS[2], KEYS[3], field, ARGV[a + 1], now, max) then
    redis.call('HINCRBY', KEYS[4], 'receipts|early|' .. ARGV[a + 2], 1)
    out[#out + 1] = ''
  else
    redis.call('HINCRBY', KEYS[4], 'receipts|dropped|' .. ARGV[a + 2], 1)
    out[#out + 1] = 0
  end
end
return out
