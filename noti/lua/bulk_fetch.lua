-- The bulk transport's fetch (noti/celery/transport.py): note the message BRPOP took, pop up to n
-- more from the same list, and note each of them, in one atomic step, so no message is
-- ever out of both the list and kombu's unacked bookkeeping. Optionally, in the same step,
-- claim the record of each plain delivery message, so the worker's first round trip after
-- a wake-up both takes the messages and leases their records.
-- KEYS[1] the list, KEYS[2] kombu's unacked index, KEYS[3] kombu's unacked hash,
-- KEYS[4..] when claiming: one opted-out set per channel.
-- ARGV[1] now (seconds), ARGV[2] n (0: pop none), ARGV[3] the message BRPOP took,
-- ARGV[4] the record key prefix (absent or "" = claim nothing), ARGV[5] now (ms), ARGV[6] lease
-- length (ms), ARGV[7] owner token, ARGV[8] the delivery task's name, ARGV[9..] the
-- channel of each opted-out set, in the order of the keys.
-- The entries are kombu's own: index score = now, hash value = [message, exchange,
-- routing key] with the message as received. A message that is not a kombu envelope is
-- not noted (the caller drops it, as kombu would fail on it).
-- A message is claimed only when it is a plain delivery: the delivery task, JSON in
-- base64, no eta and no expiry (those take Celery's own path), one record id (as noti
-- makes them) as its only argument. Its claim is the claim_record row (claim_record.lua); any other message gets
-- {-1}.
-- The record keys are built here (ARGV[4] .. id), not declared in KEYS: a message's record
-- id is known only once the script has read it. Fine on one Redis, not on Redis Cluster
-- (which noti does not support).
-- Returns {popped, claims}: the messages popped, in the order kombu would have taken
-- them, and one claim per message (the one BRPOP took first), empty when not claiming.
--#include claim_record.lua

local function note(raw)
  local ok, message = pcall(cjson.decode, raw)
  if not ok or type(message) ~= 'table' or type(message.properties) ~= 'table' then
    return nil
  end
  local props = message.properties
  local tag = props.delivery_tag
  if type(tag) ~= 'string' then
    return nil
  end
  local info = type(props.delivery_info) == 'table' and props.delivery_info or {}
  local exchange = info.exchange == nil and cjson.null or info.exchange
  local routing_key = info.routing_key == nil and cjson.null or info.routing_key
  redis.call('ZADD', KEYS[2], ARGV[1], tag)
  redis.call('HSET', KEYS[3], tag,
    '[' .. raw .. ', ' .. cjson.encode(exchange) .. ', ' .. cjson.encode(routing_key) .. ']')
  return message
end

local B64 = {}
do
  local alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'
  for i = 1, 64 do
    B64[string.byte(alphabet, i)] = i - 1
  end
end

-- the first bytes of base64 text (up to 3/4 of `limit` characters); stops at the first
-- character outside the alphabet (padding included)
local function unbase64_head(text, limit)
  local out = {}
  for i = 1, math.min(#text, limit) - 3, 4 do
    local a, b, c, d = string.byte(text, i, i + 3)
    a, b, c, d = B64[a], B64[b], B64[c], B64[d]
    if not (a and b) then
      break
    end
    local v = a * 262144 + b * 4096 + (c or 0) * 64 + (d or 0)
    local x, y, z = math.floor(v / 65536), math.floor(v / 256) % 256, v % 256
    if not c then
      out[#out + 1] = string.char(x)
      break
    elseif not d then
      out[#out + 1] = string.char(x, y)
      break
    end
    out[#out + 1] = string.char(x, y, z)
  end
  return table.concat(out)
end

local function absent(value)
  return value == nil or value == cjson.null
end

-- The record id of a plain delivery message, else nil. The body is Celery's JSON
-- [[record_id], {}, {...}]: the id is read from its start (ids noti makes are at most 64
-- letters, digits, "_" and "-"), so the body is not decoded whole. The batcher reads
-- the body itself and checks that the claim is its record's.
local function record_id(message)
  local headers = message.headers
  if type(headers) ~= 'table' or headers.task ~= ARGV[8] or not absent(headers.eta)
      or not absent(headers.expires) or message.properties.body_encoding ~= 'base64'
      or message['content-type'] ~= 'application/json' or type(message.body) ~= 'string' then
    return nil
  end
  return string.match(unbase64_head(message.body, 96), '^%[%["([%w_%-]+)"%]')
end

local messages = {note(ARGV[3]) or false}
local popped = {}
if tonumber(ARGV[2]) > 0 then
  popped = redis.call('RPOP', KEYS[1], ARGV[2]) or {}
  for i, raw in ipairs(popped) do
    messages[i + 1] = note(raw) or false
  end
end

local claims = {}
if (ARGV[4] or '') ~= '' then
  local now = tonumber(ARGV[5])
  local lease_until = now + tonumber(ARGV[6])
  local optouts = {}
  for j = 9, #ARGV do
    optouts[ARGV[j]] = KEYS[j - 5]
  end
  for i, message in ipairs(messages) do
    local id = message and record_id(message)
    if id then
      claims[i] = claim_record(ARGV[4] .. id, now, lease_until, ARGV[7], '', optouts)
    else
      claims[i] = {-1}
    end
  end
end
return {popped, claims}
