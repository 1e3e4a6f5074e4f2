-- Claim records for sending: only a waiting record whose lease has expired is taken.
-- KEYS[1..n] record hashes, then one opted-out set per channel.
-- ARGV[1] now (ms), ARGV[2] lease length (ms), ARGV[3] owner token,
-- ARGV[4] creator the record must have ("" = anyone), ARGV[5] n,
-- ARGV[6..] the channel of each opted-out set, in the order of the keys.
-- Returns one claim_record row per record (claim_record.lua says what each means).
--#include preference.lua
--#include timeline.lua
--#include claim_record.lua
local times = claim_times(ARGV[1], ARGV[2])
local n = tonumber(ARGV[5])
local optouts = {}
for j = 6, #ARGV do
  optouts[ARGV[j]] = KEYS[n + j - 5]
end
local out = {}
for i = 1, n do
  out[i] = claim_record(KEYS[i], times, ARGV[3], ARGV[4], optouts)
end
return out
