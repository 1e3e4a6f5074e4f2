-- The bulk transport's fetch (noti/transport.py): note the message BRPOP took, pop up to n
-- more from the same list, and note each of them, in one atomic step, so no message is
-- ever out of both the list and kombu's unacked bookkeeping.
-- KEYS[1] the list, KEYS[2] kombu's unacked index, KEYS[3] kombu's unacked hash.
-- ARGV[1] now (seconds), ARGV[2] n (0: pop none), ARGV[3] the message BRPOP took.
-- The entries are kombu's own: index score = now, hash value = [message, exchange,
-- routing key] with the message as received. A message that is not a kombu envelope is
-- not noted (the caller drops it, as kombu would fail on it).
-- Returns the messages popped, in the order kombu would have taken them.
local function note(raw)
  local ok, message = pcall(cjson.decode, raw)
  if not ok or type(message) ~= 'table' or type(message.properties) ~= 'table' then
    return
  end
  local props = message.properties
  local tag = props.delivery_tag
  if type(tag) ~= 'string' then
    return
  end
  local info = type(props.delivery_info) == 'table' and props.delivery_info or {}
  local exchange = info.exchange == nil and cjson.null or info.exchange
  local routing_key = info.routing_key == nil and cjson.null or info.routing_key
  redis.call('ZADD', KEYS[2], ARGV[1], tag)
  redis.call('HSET', KEYS[3], tag,
    '[' .. raw .. ', ' .. cjson.encode(exchange) .. ', ' .. cjson.encode(routing_key) .. ']')
end

note(ARGV[3])
local popped = {}
if tonumber(ARGV[2]) > 0 then
  popped = redis.call('RPOP', KEYS[1], ARGV[2]) or {}
  for _, raw in ipairs(popped) do
    note(raw)
  end
end
return popped
