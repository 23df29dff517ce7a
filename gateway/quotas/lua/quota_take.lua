-- Takes one call from every limit of a call's quotas, or from none: the first limit the call
-- would pass refuses it and nothing is counted. Windows are fixed and read from Redis's own
-- clock, so every replica counts in the same window.
--- KEYS: counters...
--- ARGV: limits...
-- counters: each limit's counter, without its window: the script appends ':<window index>'
-- (cc:{t:<tenant>}:quota:...: all of one tenant, one slot).
-- limits: one per counter, "allowed,window_ms,cost": cost 1 counts a call; cost 0 checks a
-- budget charged after the call (quota_charge.lua) and counts nothing.
-- Returns {0} when the call was counted, else {i, used, retry_after_ms} for the first limit
-- (the i-th, 1-based) it would pass.
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local windows = {}
for i, counter in ipairs(counters) do
  local allowed, window, cost = string.match(limits[i], '^([^,]+),([^,]+),([^,]+)$')
  allowed, window, cost = tonumber(allowed), tonumber(window), tonumber(cost)
  local index = math.floor(now / window)
  local key = counter .. ':' .. index
  local used = tonumber(redis.call('GET', key) or '0')
  if (cost > 0 and used + cost > allowed) or (cost == 0 and used >= allowed) then
    return {i, tostring(used), (index + 1) * window - now}
  end
  windows[i] = {key, cost, (index + 1) * window - now}
end
for _, taken in ipairs(windows) do
  if taken[2] > 0 then
    redis.call('INCRBY', taken[1], taken[2])
    redis.call('PEXPIRE', taken[1], taken[3] + 60000)
  end
end
return {0}
