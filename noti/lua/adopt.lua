-- Adopt the messages a foreign Celery producer queued under priority lists that noti's
-- workers never read: lists named with another separator than noti's (kombu's default
-- "\x06\x16", or one the producer's binding set names). Each message moves, oldest first,
-- to the list noti's workers read for its Celery priority: properties.priority (0 = served
-- first; kombu clamps it to 0..9 and noti's steps are 0..9), or the step in the foreign
-- list's name when the message carries no usable priority. RPOP and LPUSH run in one script
-- call, so a message is always in exactly one of the two lists.
-- The destination lists are built here from ARGV, not declared in KEYS: the broker is one
-- Redis (kombu's Redis transport does not run on a cluster).
-- KEYS: the foreign lists.
-- ARGV: 1 noti's separator, 2 the most messages to move in this call, then per list i
-- (from 1): ARGV[2 + 2i - 1] its queue, ARGV[2 + 2i] the step in its name.
-- Returns, per list, how many of its messages moved.
local sep = ARGV[1]
local budget = tonumber(ARGV[2])
local moved = {}
for i, source in ipairs(KEYS) do
  local queue, named_step = ARGV[1 + 2 * i], tonumber(ARGV[2 + 2 * i])
  local count = 0
  while budget > 0 do
    local raw = redis.call('RPOP', source)
    if not raw then
      break
    end
    local step = named_step
    local ok, message = pcall(cjson.decode, raw)
    if ok and type(message) == 'table' and type(message.properties) == 'table' then
      local priority = tonumber(message.properties.priority)
      if priority and priority == priority then -- not NaN
        step = math.max(0, math.min(9, math.floor(priority)))
      end
    end
    local destination = queue
    if step > 0 then
      destination = queue .. sep .. step
    end
    redis.call('LPUSH', destination, raw)
    count = count + 1
    budget = budget - 1
  end
  moved[i] = count
end
return moved
