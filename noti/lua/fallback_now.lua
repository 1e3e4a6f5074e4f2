-- Make fallbacks due now (their notification failed before their deadline): each one still
-- waiting in the delayed set, untouched by a sender, is moved to now (never later than it
-- was) and its not-before time with it.
-- KEYS[1] delayed set, KEYS[2..] the fallback records. ARGV[1] now (ms).
-- Returns how many were moved.
--#include timeline.lua
--#include standby.lua
local now, moved = ARGV[1], 0
for i = 2, #KEYS do
  local id = standby_free(KEYS[i], now)
  if id and standby_now(KEYS[1], KEYS[i], id, now) then
    moved = moved + 1
  end
end
return moved
