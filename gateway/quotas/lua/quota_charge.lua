-- Charges what a call used (its sandbox CPU) to its day budgets, in the window of Redis's
-- clock now (a call that ran over midnight UTC is charged to the new day).
--- KEYS: counters...
--- ARGV: window_ms, amount
-- counters: each budget's counter without its window (the script appends ':<index>').
-- amount: what the call used, in the budget's unit (CPU ms, a whole number). Returns nothing.
-- INCRBY, not INCRBYFLOAT: Redis 6.2 rewrites an INCRBYFLOAT's arguments for replication,
-- which inside a script corrupts its cached arguments and crashes the server on a later
-- script (seen with the embedded redis-server 6.2.14).
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local index = math.floor(now / tonumber(window_ms))
for _, counter in ipairs(counters) do
  local key = counter .. ':' .. index
  redis.call('INCRBY', key, amount)
  redis.call('PEXPIRE', key, (index + 1) * tonumber(window_ms) - now + 60000)
end
return 0
