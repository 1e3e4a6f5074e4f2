-- A fragment, not a script: the counters of noti/redis/counters.py, kept in one hash. Included
-- (--#include) by the scripts that count what they change. Counts are gathered in a table
-- and written once per distinct field at the end of the script (one HINCRBY each).
-- count(counts, field[, amount]) adds amount (default 1) to one field.
-- tally_write(key, counts) writes them.
local function count(counts, field, amount)
  counts[field] = (counts[field] or 0) + (amount or 1)
end

local function tally_write(key, counts)
  for field, amount in pairs(counts) do
    redis.call('HINCRBY', key, field, amount)
  end
end

-- The provider label of a record: the provider(s) it names, or 'default' (its channel's).
local function provider_label(record_key, kind)
  return redis.call('HGET', record_key, 'noti_' .. kind .. '_provider') or 'default'
end
