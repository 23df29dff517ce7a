-- The commutative state operations, for the commit script: `apply_op(op, stored, operand)`
-- returns the new value's JSON text, or nil and the stored value's JSON type when the op does
-- not fit it. `stored` is the key's JSON text (nil: no value), `operand` the write's.
-- Values are compact JSON as the gateway writes them. A small reader keeps every number,
-- string and literal as its original text, so a merge re-encodes exactly what it was given:
-- cjson would round numbers to 14 digits and turn an empty list into {}.

local function json_type(text)
  local c = string.sub(text, 1, 1)
  if c == '{' then return 'object' elseif c == '[' then return 'array'
  elseif c == '"' then return 'string' elseif c == 't' or c == 'f' then return 'boolean'
  elseif c == 'n' then return 'null' end
  return 'number'
end

local function skip_space(s, i) return string.find(s, '[^ \t\r\n]', i) or #s + 1 end

local function string_end(s, i)  -- s[i] is the opening quote; the index of the closing one
  local j = i + 1
  while true do
    j = string.find(s, '["\\]', j)
    if string.byte(s, j) == 34 then return j end
    j = j + 2  -- a backslash and the character it escapes
  end
end

-- A node: {t = 'object', keys = {raw key...}, map = {raw key -> node}}, {t = 'array',
-- items = {node...}}, or {t = <scalar type>, raw = text}. Returns the node and the next index.
local function parse(s, i)
  i = skip_space(s, i)
  local c = string.sub(s, i, i)
  if c == '{' or c == '[' then
    local object = c == '{'
    local node = object and {t = 'object', keys = {}, map = {}} or {t = 'array', items = {}}
    local close = object and '}' or ']'
    i = skip_space(s, i + 1)
    if string.sub(s, i, i) == close then return node, i + 1 end
    while true do
      local item
      if object then
        i = skip_space(s, i)
        local e = string_end(s, i)
        local k = string.sub(s, i, e)
        i = skip_space(s, e + 1)  -- the ':'
        item, i = parse(s, i + 1)
        if node.map[k] == nil then node.keys[#node.keys + 1] = k end
        node.map[k] = item
      else
        item, i = parse(s, i)
        node.items[#node.items + 1] = item
      end
      i = skip_space(s, i)
      if string.sub(s, i, i) == close then return node, i + 1 end
      i = i + 1  -- the ','
    end
  end
  if c == '"' then
    local e = string_end(s, i)
    return {t = 'string', raw = string.sub(s, i, e)}, e + 1
  end
  local e = string.find(s, '[,}%] \t\r\n]', i) or #s + 1
  local raw = string.sub(s, i, e - 1)
  return {t = json_type(raw), raw = raw}, e
end

local function encode(node)
  local parts = {}
  if node.t == 'object' then
    for n, k in ipairs(node.keys) do parts[n] = k .. ':' .. encode(node.map[k]) end
    return '{' .. table.concat(parts, ',') .. '}'
  elseif node.t == 'array' then
    for n, item in ipairs(node.items) do parts[n] = encode(item) end
    return '[' .. table.concat(parts, ',') .. ']'
  end
  return node.raw
end

-- JSON equality: numbers by value, objects whatever their key order, true is not 1.
local function equal(a, b)
  if a.t ~= b.t then return false end
  if a.t == 'number' then return tonumber(a.raw) == tonumber(b.raw) end
  if a.t == 'string' then return a.raw == b.raw or cjson.decode(a.raw) == cjson.decode(b.raw) end
  if a.t == 'array' then
    if #a.items ~= #b.items then return false end
    for n = 1, #a.items do
      if not equal(a.items[n], b.items[n]) then return false end
    end
    return true
  end
  if a.t == 'object' then
    if #a.keys ~= #b.keys then return false end
    for _, k in ipairs(a.keys) do
      if b.map[k] == nil or not equal(a.map[k], b.map[k]) then return false end
    end
    return true
  end
  return a.raw == b.raw
end

-- Where both sides hold an object the merge recurses; anywhere else the operand's value wins.
local function merge(into, from)
  for _, k in ipairs(from.keys) do
    local old, new = into.map[k], from.map[k]
    if old ~= nil and old.t == 'object' and new.t == 'object' then
      merge(old, new)
    else
      if old == nil then into.keys[#into.keys + 1] = k end
      into.map[k] = new
    end
  end
end

local function number_text(x)
  if x ~= x or x == math.huge or x == -math.huge then return nil end
  if x == math.floor(x) and math.abs(x) < 2 ^ 53 then return string.format('%.0f', x) end
  return string.format('%.17g', x)  -- 17 digits: reads back as exactly this double
end

local OP_EMPTY = {increment = '0', append = '[]', add_to_set = '[]', merge = '{}'}
local OP_WANTS = {increment = 'number', append = 'array', add_to_set = 'array', merge = 'object'}

local function apply_op(op, stored, operand)
  if stored == nil or stored == 'null' then stored = OP_EMPTY[op] end
  local have = json_type(stored)
  if have ~= OP_WANTS[op] then return nil, have end
  if op == 'increment' then
    local sum = number_text(tonumber(stored) + tonumber(operand))
    if sum == nil then return nil, 'number (the sum is not a finite number)' end
    return sum
  end
  if op == 'merge' then
    local into = parse(stored, 1)
    merge(into, parse(operand, 1))
    return encode(into)
  end
  if op == 'add_to_set' then
    local item = parse(operand, 1)
    for _, x in ipairs(parse(stored, 1).items) do
      if equal(x, item) then return stored end
    end
  end
  if stored == '[]' then return '[' .. operand .. ']' end
  return string.sub(stored, 1, -2) .. ',' .. operand .. ']'
end
