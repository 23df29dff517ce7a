-- Record one call's outcome on a tool's circuit breaker (after record_outcome.lua).
--- KEYS: breaker
--- ARGV: now_ms, healthy, failure_threshold, cooldown_ms
-- healthy: '1' or '0'.
-- Returns the breaker's state: 'closed' or 'open'.
return record_outcome(breaker, tonumber(now_ms), healthy == '1', tonumber(failure_threshold),
  tonumber(cooldown_ms))
