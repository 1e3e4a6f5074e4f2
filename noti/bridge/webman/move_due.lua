local delayedTaskSetKey = KEYS[1]
local delayedDataHashKey = KEYS[2]
local streamKey = KEYS[3]
local currentTime = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])

local identifiers = redis.call('zrangebyscore', delayedTaskSetKey, 0, currentTime, 'LIMIT', 0, limit)
if #identifiers == 0 then
    return {}
end

local results = {}
for i, identifier in ipairs(identifiers) do
    local taskData = redis.call('hget', delayedDataHashKey, identifier)
    if taskData ~= false then
        local messageId = redis.call('xadd', streamKey, '*', 'message', taskData)
        table.insert(results, messageId)
    end
end

redis.call('hdel', delayedDataHashKey, unpack(identifiers))
redis.call('zrem', delayedTaskSetKey, unpack(identifiers))

return results