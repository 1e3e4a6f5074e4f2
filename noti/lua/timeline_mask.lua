-- Erasure (noti/recipients/erasure.py): take an address out of the steps of records'
-- timelines, in place and at once, so a step written meanwhile cannot shift what is rewritten
-- (a full timeline drops its oldest step as a new one comes).
-- KEYS: each record's timeline list. ARGV: per key, n, then n pairs (text, what replaces it),
-- applied in their order to every step that holds the text (plain text, not a pattern).
-- Returns how many steps were rewritten.
local function replaced(s, from, to)
  local out, at = {}, 1
  while true do
    local first, last = string.find(s, from, at, true)
    if not first then
      break
    end
    out[#out + 1] = string.sub(s, at, first - 1)
    out[#out + 1] = to
    at = last + 1
  end
  out[#out + 1] = string.sub(s, at)
  return table.concat(out)
end

local a, changed = 0, 0
for k = 1, #KEYS do
  local n = tonumber(ARGV[a + 1])
  local steps = redis.call('LRANGE', KEYS[k], 0, -1)
  for i, step in ipairs(steps) do
    local text = step
    for p = 0, n - 1 do
      local from = ARGV[a + 2 + 2 * p]
      if from ~= '' and string.find(text, from, 1, true) then
        text = replaced(text, from, ARGV[a + 3 + 2 * p])
      end
    end
    if text ~= step then
      redis.call('LSET', KEYS[k], i - 1, text)
      changed = changed + 1
    end
  end
  a = a + 1 + 2 * n
end
return changed
