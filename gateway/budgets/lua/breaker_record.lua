-- Record one call's outcome on a tool's circuit breaker (after record_outcome.lua).
-- KEYS: breaker.  ARGV: now (ms), healthy ('1'/'0'), failure threshold, cool-down (ms).
-- Returns the breaker's state: 'closed' or 'open'.
return record_outcome(KEYS[1], tonumber(ARGV[1]), ARGV[2] == '1', tonumber(ARGV[3]),
  tonumber(ARGV[4]))
