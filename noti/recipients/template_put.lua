-- Store a new version of a template and make it the current one.
-- KEYS[1] the template's hash (noti:tmpl:<owner>:<name>), KEYS[2] the owner's template names
-- (noti:tmpls:<owner>).
-- ARGV[1] the template's name, ARGV[2] the document (JSON), ARGV[3] now (epoch ms).
-- Returns {version, created ms}: the version written (the first is 1) and when the template
-- was created (kept from its first version).
local version = redis.call('HINCRBY', KEYS[1], 'current', 1)
redis.call('HSET', KEYS[1], 'v' .. version, ARGV[2], 'lm', ARGV[3])
redis.call('HSETNX', KEYS[1], 'ct', ARGV[3])
redis.call('ZADD', KEYS[2], 'NX', ARGV[3], ARGV[1])
return {version, redis.call('HGET', KEYS[1], 'ct')}
