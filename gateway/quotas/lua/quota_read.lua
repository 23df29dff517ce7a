-- What a caller used of each limit in its current window, by Redis's clock.
--- KEYS: counters...
--- ARGV: windows...
-- counters: each limit's counter without its window; windows: each one's window in ms.
-- Returns {now_ms, used_1, used_2, ...} (used as strings; '0' for a window not started).
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local found = {now}
for i, counter in ipairs(counters) do
  local index = math.floor(now / tonumber(windows[i]))
  found[#found + 1] = redis.call('GET', counter .. ':' .. index) or '0'
end
return found
