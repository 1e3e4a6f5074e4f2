-- A fragment, not a script: a record's timeline (noti/core/timeline.py), a LIST of steps (JSON
-- objects: "at" ms, "ev" its event, then its details) next to the record. Included
-- (--#include) by every script that changes a record's state, so each step is written in the
-- same atomic step as the change it describes, and only when that change is applied.
-- tl_key(record key) is the timeline's key: <prefix>rec:<id> -> <prefix>tl:<id>. It is made
-- from the record's key, not declared: a record and its timeline are always read and
-- written together on the one primary that holds the records.
-- tl_add(record key, step) appends one step (JSON text); tl_add_lines(record key, text)
-- appends the steps of a text with one step per line (how a finish's attempt steps come).
-- tl_unworded(text) / tl_unworded_lines(text): what a record whose recipient was erased
-- (noti_erased, noti/recipients/erasure.py) keeps of an error text / of steps written after
-- the erasure (a send in flight then, a late delivery receipt): a noti code, never the words,
-- which a vendor's text may quote the erased address in.
-- The list keeps the newest TL_MAX steps; the record's field noti_tl_drop counts the older
-- ones dropped (the record's own creation fields are its first step: noti/core/timeline.py).
local TL_MAX = 50

local function tl_key(key)
  local base, id = string.match(key, '^(.*)rec:(.*)$')
  return base .. 'tl:' .. id
end

local function tl_trim(key, tkey, n)
  if n > TL_MAX then
    redis.call('LTRIM', tkey, n - TL_MAX, -1)
    redis.call('HINCRBY', key, 'noti_tl_drop', n - TL_MAX)
  end
end

local function tl_add(key, step)
  local tkey = tl_key(key)
  tl_trim(key, tkey, redis.call('RPUSH', tkey, step))
end

local function tl_add_lines(key, text)
  local steps = {}
  for line in string.gmatch(text, '[^\n]+') do
    steps[#steps + 1] = line
  end
  if #steps > 0 then
    local tkey = tl_key(key)
    tl_trim(key, tkey, redis.call('RPUSH', tkey, unpack(steps)))
  end
end

-- A step's JSON text: at (ms, as text or number), ev, then the fields of a table (string values
-- JSON-escaped by cjson; numbers as numbers).
local function tl_step(at, ev, fields)
  local out = '{"at":' .. string.format('%d', tonumber(at)) .. ',"ev":"' .. ev .. '"'
  if fields then
    for name, value in pairs(fields) do
      out = out .. ',"' .. name .. '":' .. cjson.encode(value)
    end
  end
  return out .. '}'
end

local TL_UNWORDED = 'not kept: the recipient was erased'

local function tl_unworded(text)
  if not text or text == '' then
    return text
  end
  -- a noti code only (e.<family>.<…>): a vendor's "<device token>: …" keeps nothing
  local code = string.match(text, '^(e%.[%w_%-]+%.[%w%._%-]+):')
  return code and (code .. ': ' .. TL_UNWORDED) or TL_UNWORDED
end

local function tl_unworded_lines(text)
  local steps = {}
  for line in string.gmatch(text, '[^\n]+') do
    local ok, step = pcall(cjson.decode, line)
    if ok and type(step) == 'table' then
      for _, name in ipairs({'text', 'vendor_code'}) do
        if step[name] and step[name] ~= cjson.null then
          step[name] = TL_UNWORDED
        end
      end
      steps[#steps + 1] = cjson.encode(step)
    end
  end
  return table.concat(steps, '\n')
end
