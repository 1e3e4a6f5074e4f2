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
--#include preference.lua
--#include timeline.lua
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

-- The value of each byte of base64's alphabet (A-Z a-z 0-9 + /), written out: built by a
-- loop, the table cost every call (one message or many) four times as much.
local B64 = {
  [65] = 0, [66] = 1, [67] = 2, [68] = 3, [69] = 4, [70] = 5, [71] = 6, [72] = 7, [73] = 8,
  [74] = 9, [75] = 10, [76] = 11, [77] = 12, [78] = 13, [79] = 14, [80] = 15, [81] = 16, [82] = 17,
  [83] = 18, [84] = 19, [85] = 20, [86] = 21, [87] = 22, [88] = 23, [89] = 24, [90] = 25, [97] = 26,
  [98] = 27, [99] = 28, [100] = 29, [101] = 30, [102] = 31, [103] = 32, [104] = 33, [105] = 34,
  [106] = 35, [107] = 36, [108] = 37, [109] = 38, [110] = 39, [111] = 40, [112] = 41, [113] = 42,
  [114] = 43, [115] = 44, [116] = 45, [117] = 46, [118] = 47, [119] = 48, [120] = 49, [121] = 50,
  [122] = 51, [48] = 52, [49] = 53, [50] = 54, [51] = 55, [52] = 56, [53] = 57, [54] = 58,
  [55] = 59, [56] = 60, [57] = 61, [43] = 62, [47] = 63
}

-- The record id a Celery body in base64 starts with ([["<id>"], ...), else nil. Only its
-- first 96 characters count; decoding stops at the first character outside the alphabet
-- (padding included), and as soon as the id's closing quote and the byte after it are
-- decoded (the match below depends on no later byte).
local function body_id(body)
  -- decoded in place: a group's 3 bytes never land past its own 4 characters, read first
  local t = {string.byte(body, 1, 96)}
  local n, last = 0, false
  for i = 1, #t - 3, 4 do
    local a, b, c, d = B64[t[i]], B64[t[i + 1]], B64[t[i + 2]], B64[t[i + 3]]
    if not (a and b) then
      break
    end
    -- the group's 24 bits as 3 bytes (Lua 5.1 has no integer division)
    local c0 = c or 0
    local x, y, z = a * 4 + (b - b % 16) / 16, b % 16 * 16 + (c0 - c0 % 4) / 4,
      c0 % 4 * 64 + (d or 0)
    t[n + 1], t[n + 2], t[n + 3] = x, y, z
    if not (c and d) then -- a partial group ends the text: 1 or 2 bytes
      n = n + (c and 2 or 1)
      break
    end
    n = n + 3
    if last then
      break
    end
    -- a quote past the first group ('[["') ends the id: the byte after it is in this group
    -- or the next
    last = i > 1 and (x == 34 or y == 34 or z == 34)
  end
  return string.match(string.char(unpack(t, 1, n)), '^%[%["([%w_%-]+)"%]')
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
  return body_id(message.body)
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
  local times = claim_times(ARGV[5], ARGV[6])
  local optouts = {}
  for j = 9, #ARGV do
    optouts[ARGV[j]] = KEYS[j - 5]
  end
  for i, message in ipairs(messages) do
    local id = message and record_id(message)
    if id then
      claims[i] = claim_record(ARGV[4] .. id, times, ARGV[7], '', optouts)
    else
      claims[i] = {-1}
    end
  end
end
return {popped, claims}
