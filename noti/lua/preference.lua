-- A fragment, not a script: a recipient's preference for one category on one channel
-- (noti/recipients). Included (--#include) by notify.lua, which decides at creation, and by
-- claim.lua and bulk_fetch.lua (before claim_record.lua), which decide again before a send, so
-- an opt-out written after a record was made (while quiet hours hold it, or before its
-- fallback is due) still stops it.
-- preference_out(key, category, channel, default) returns nil when the recipient takes it, or
-- why not: 'optout' (their own choice: the most specific of p:<category>:<channel>,
-- p:<category>:*, p:*:<channel>, p:*:* that is set is '0'), 'off' (none is set and the
-- category's default, '1' or '0', is off), 'erased' (the recipient was deleted).
-- preference_of(exact, whole, everywhere, all, default): the same from the four fields read
-- already (notify.lua reads them with the profile's version, one HMGET per notice).
local function preference_of(exact, whole, everywhere, all, default)
  local value = exact or whole or everywhere or all
  if value == '0' then
    return 'optout'
  elseif not value and default == '0' then
    return 'off'
  end
  return nil
end

local function preference_out(key, category, channel, default)
  local doc, exact, whole, everywhere, all = unpack(redis.call('HMGET', key, 'doc',
    'p:' .. category .. ':' .. channel, 'p:' .. category .. ':*', 'p:*:' .. channel, 'p:*:*'))
  if not doc then
    return 'erased'
  end
  return preference_of(exact, whole, everywhere, all, default)
end

-- The same for a record's noti_pref field: "<recipient key> <category> <channel> <0|1>".
local function record_preference_out(pref)
  local key, category, channel, default = string.match(pref, '^(%S+) (%S+) (%S+) ([01])$')
  if not key then
    return nil
  end
  return preference_out(key, category, channel, default)
end
