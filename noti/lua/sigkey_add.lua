-- A user's new webhook signing secret (noti.access.signing), unless they have ARGV[3] already:
-- the count check and the write in one call, so two concurrent adds cannot pass the limit.
-- KEYS[1] noti:sigkeys:<user>; ARGV[1] key id, ARGV[2] "<created ms> <secret>", ARGV[3] limit.
-- Returns 1 when added, 0 when the user has the limit already.
if redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
