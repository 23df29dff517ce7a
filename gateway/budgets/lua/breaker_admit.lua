-- Let a call through a tool's circuit breaker (after breaker_gate.lua).
-- KEYS: breaker.  ARGV: now (ms), probe lease (ms).  Returns {admitted (0/1), wait ms, state}.
local admitted, wait, state = breaker_gate(KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]))
return {admitted, wait, state}
