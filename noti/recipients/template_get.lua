-- Read one version of a template (the current one unless asked) in one round trip.
-- KEYS[1] the template's hash (noti:tmpl:<owner>:<name>).
-- ARGV[1] the version wanted ('' = the current one).
-- Returns false when there is no such template, else {version, created ms, modified ms,
-- document} (document false when there is no such version).
local current = redis.call('HGET', KEYS[1], 'current')
if not current then
  return false
end
local version = current
if ARGV[1] ~= '' then
  version = ARGV[1]
end
local fields = redis.call('HMGET', KEYS[1], 'ct', 'lm', 'v' .. version)
return {version, fields[1], fields[2], fields[3]}
