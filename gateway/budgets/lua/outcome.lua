-- One tool call's outcome in one round trip: its latency sample, how late its kill answered,
-- the breaker's evidence and what the call earns its identity's hedge budget (after
-- record_sample.lua, record_outcome.lua and hedge_deposit.lua). All keys carry the tenant's
-- hash tag, so the script touches a single cluster slot.
-- KEYS: latency window, breaker, kill-overshoot window (all the tenant's, for this tool),
--       the caller's hedge bucket (the tenant's too).
-- ARGV: now (ms), sample member ('' = no sample), window (ms), max samples,
--       evidence ('1' healthy, '0' a fault, '' none), failure threshold, cool-down (ms),
--       kill-overshoot member ('' = none), hedge share ('' = no deposit), hedge cap, the
--       hedge bucket's time to live (ms); share and cap in millionths of a hedge.
-- Returns the breaker's state ('closed' or 'open'), or '' when there was no evidence.
local now = tonumber(ARGV[1])
if ARGV[2] ~= '' then
  record_sample(KEYS[1], ARGV[2], now, tonumber(ARGV[3]), tonumber(ARGV[4]))
end
if ARGV[8] ~= '' then
  record_sample(KEYS[3], ARGV[8], now, tonumber(ARGV[3]), tonumber(ARGV[4]))
end
if ARGV[9] ~= '' then
  hedge_deposit(KEYS[4], tonumber(ARGV[9]), tonumber(ARGV[10]), tonumber(ARGV[11]))
end
if ARGV[5] == '' then return '' end
return record_outcome(KEYS[2], now, ARGV[5] == '1', tonumber(ARGV[6]), tonumber(ARGV[7]))
