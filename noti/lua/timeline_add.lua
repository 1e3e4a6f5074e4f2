-- Append steps to a record's timeline that no state change of the record comes with (a
-- status callback made of its change), while the record exists.
-- KEYS[1] the record. ARGV[1] the steps (JSON texts, one per line).
-- Returns 1 when written, 0 when there is no such record.
--#include timeline.lua
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
tl_add_lines(KEYS[1], ARGV[1])
return 1
