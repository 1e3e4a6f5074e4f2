-- Delete a record and every index entry pointing at it.
-- KEYS[1] record, KEYS[2] all index, KEYS[3] creator's index, KEYS[4] waiting index,
-- KEYS[5] delayed set, KEYS[6..9] status indexes, KEYS[10..13] delivery indexes, KEYS[14]
-- the receipt watch, KEYS[15] its address index (noti/core/search.py).
-- ARGV[1] id, ARGV[2] the creator the caller read (guards KEYS[3]).
-- Its timeline (timeline.lua) goes with it.
-- Returns 1 when deleted, 0 when missing, -1 when the creator did not match.
--#include timeline.lua
local creator = redis.call('HGET', KEYS[1], 'noti_c')
if not creator then
  return 0
end
if creator ~= ARGV[2] then
  return -1
end
redis.call('DEL', KEYS[1], tl_key(KEYS[1]))
for i = 2, #KEYS do
  redis.call('ZREM', KEYS[i], ARGV[1])
end
return 1
