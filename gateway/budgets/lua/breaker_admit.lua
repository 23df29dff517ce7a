-- Let a call through a tool's circuit breaker (after breaker_gate.lua).
--- KEYS: breaker
--- ARGV: now_ms, probe_lease_ms
-- Returns {admitted (0/1), wait ms, state}.
local admitted, wait, state = breaker_gate(breaker, tonumber(now_ms), tonumber(probe_lease_ms))
return {admitted, wait, state}
