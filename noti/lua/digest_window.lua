-- A fragment, not a script: one event into a digest's open window (noti/recipients/digests.py),
-- the window opened when none is. Included (--#include) by digest_add.lua (a digest event)
-- and notify.lua (a notice over a throttle that digests), so both open and fill windows alike.
-- digest_put(hkey, due_set, owner_index, window, due, doc, opened, first, event, kept, prefix):
-- hkey the digest's hash, due_set and owner_index the windows' indexes, window the id of a
-- window opened now, due when it is due (ms, text), doc what its notice is made with, opened
-- now (ms, text), first '1' for a back-off window, event the event (JSON), kept how many
-- events a window keeps in full, prefix the windows' event lists' prefix. Returns the window
-- the event went into and the events in it so far.
local function digest_put(hkey, due_set, owner_index, window, due, doc, opened, first, event, kept, prefix)
  local open = redis.call('HGET', hkey, 'w')
  if not open then
    open = window
    redis.call('HSET', hkey, 'w', open, 'due', due, 'n', '0', 'doc', doc, 'opened', opened, 'first', first)
    redis.call('ZADD', due_set, due, hkey)
    redis.call('ZADD', owner_index, due, hkey)
  end
  local n = redis.call('HINCRBY', hkey, 'n', 1)
  if n <= kept then
    redis.call('RPUSH', prefix .. open, event)
  end
  return open, n
end
