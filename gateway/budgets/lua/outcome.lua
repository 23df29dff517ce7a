-- One tool call's outcome in one round trip: its place among its tenant's calls in flight
-- given back, its latency sample, how late its kill answered, the breaker's evidence and what
-- the call earns its identity's hedge budget (after
-- record_sample.lua, record_outcome.lua and hedge_deposit.lua). All keys carry the tenant's
-- hash tag, so the script touches a single cluster slot.
--- KEYS: window, version, breaker, overshoot_window, overshoot_version, hedge_bucket, in_flight
--- ARGV: now_ms, member, window_ms, max_samples, evidence, failure_threshold, cooldown_ms, overshoot_member, hedge_share, hedge_cap, hedge_ttl_ms, call_id
-- KEYS: latency window and its version, breaker, kill-overshoot window and its version (all
--       the tenant's, for this tool), the caller's hedge bucket and the tenant's calls in
--       flight (the tenant's too).
-- ARGV: now (ms), sample member ('' = no sample), window (ms), max samples,
--       evidence ('1' healthy, '0' a fault, '' none), failure threshold, cool-down (ms),
--       kill-overshoot member ('' = none), hedge share ('' = no deposit), hedge cap, the
--       hedge bucket's time to live (ms); share and cap in millionths of a hedge; the call's
--       id among its tenant's calls in flight ('' = it holds no place).
-- Returns the breaker's state ('closed' or 'open'), or '' when there was no evidence.
local now = tonumber(now_ms)
if call_id ~= '' then redis.call('ZREM', in_flight, call_id) end
if member ~= '' then
  record_sample(window, version, member, now, tonumber(window_ms), tonumber(max_samples))
end
if overshoot_member ~= '' then
  record_sample(overshoot_window, overshoot_version, overshoot_member, now, tonumber(window_ms), tonumber(max_samples))
end
if hedge_share ~= '' then
  hedge_deposit(hedge_bucket, tonumber(hedge_share), tonumber(hedge_cap), tonumber(hedge_ttl_ms))
end
if evidence == '' then return '' end
return record_outcome(breaker, now, evidence == '1', tonumber(failure_threshold), tonumber(cooldown_ms))
