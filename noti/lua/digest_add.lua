-- One event into a recipient's digest (noti/recipients/digests.py): the open window takes it,
-- or the event opens one (due a window's length from now). One atomic step with the close
-- (digest_close.lua), so an event racing the close lands in the window closing or in the next
-- one, never both, never neither.
-- KEYS: 1 the digest's hash (its open window), 2 the due set, 3 the event's idempotency key
-- (the digest's hash again when none), 4 the counters hash, 5 the owner's index of open
-- windows (digest hash key -> due).
-- ARGV: 1 a new window id (used if none is open), 2 now ms, 3 when a window opened now is due
-- (ms), 4 what the window's notice is made with (JSON; the opening event's), 5 the event
-- (JSON), 6 how many events a window keeps in full, 7 the idempotency key's time-to-live in ms
-- (0 = none), 8 the prefix of the windows' event lists, 9 the counter field of the event,
-- 10 '1' for a back-off window (its first event is sent at once: the window notes it).
-- Returns {window id, events in it so far} (1: this event opened the window); {window id,
-- -1} when the idempotency key named an event already (nothing added).
--#include tally.lua
--#include digest_window.lua
if ARGV[7] ~= '0' then
  local existing = redis.call('GET', KEYS[3])
  if existing then
    return {existing, -1}
  end
end
local window, n = digest_put(KEYS[1], KEYS[2], KEYS[5], ARGV[1], ARGV[3], ARGV[4], ARGV[2], ARGV[10], ARGV[5],
  tonumber(ARGV[6]), ARGV[8])
if ARGV[7] ~= '0' then
  redis.call('SET', KEYS[3], window, 'PX', ARGV[7])
end
local counts = {}
count(counts, ARGV[9])
tally_write(KEYS[4], counts)
return {window, n}
