-- A fragment, not a script: receipts kept until the send they name is recorded (the vendor
-- answered the send and pushed its receipt before the worker wrote the send), under
-- "<provider>:<vendor id>" in one hash, their ages in a sorted set. Included (--#include) by
-- receipt_early.lua and delivery.lua. Bounded in number (NOTI_RECEIPT_EARLY_MAX, all
-- providers together) and in lifetime (NOTI_RECEIPT_EARLY_TTL_S): a vendor key pushing
-- receipts for ids noti never sent fills the table for that long at most, and no more.
-- early_trim(table, ages, now, ttl_ms) forgets the receipts past their lifetime (at most
-- EARLY_TRIM per call; the sweep takes the rest).
-- early_keep(table, ages, field, json, now, max) keeps one: true when it is kept (or a final
-- word is kept for that field already: of two receipts for one message the final one stays,
-- forward-only as on the record), false when the table is full.
local EARLY_TRIM = 1000

local function early_trim(tbl, ages, now, ttl_ms)
  local old = redis.call('ZRANGEBYSCORE', ages, '-inf', tonumber(now) - tonumber(ttl_ms), 'LIMIT', 0, EARLY_TRIM)
  if #old > 0 then
    redis.call('HDEL', tbl, unpack(old))
    redis.call('ZREM', ages, unpack(old))
  end
end

local function early_keep(tbl, ages, field, json, now, max)
  local kept = redis.call('HGET', tbl, field)
  if not kept then
    if redis.call('HLEN', tbl) >= tonumber(max) then
      return false
    end
  elseif not string.find(kept, '"state":"accepted"', 1, true) then
    return true
  end
  redis.call('HSET', tbl, field, json)
  redis.call('ZADD', ages, now, field)
  return true
end
