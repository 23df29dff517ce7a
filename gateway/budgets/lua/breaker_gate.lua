-- Function breaker_gate(key, now, probe_ms): let a call through a tool's circuit breaker, or
-- say how long it stays shut. Loaded before the bodies that call it (breaker_admit.lua,
-- admission.lua).
-- Returns admitted (0/1), wait ms, state: 'closed', 'open', 'half_open' (another probe holds
-- the lease) or 'probe'. A half-open breaker admits one probe per lease, across all replicas;
-- a probe that never reports frees the lease when it runs out.
local function breaker_gate(key, now, probe_ms)
  local open_until = tonumber(redis.call('HGET', key, 'open_until') or '0')
  if open_until == 0 then return 1, 0, 'closed' end
  if now < open_until then return 0, open_until - now, 'open' end
  local probe_until = tonumber(redis.call('HGET', key, 'probe_until') or '0')
  if probe_until > now then return 0, probe_until - now, 'half_open' end
  redis.call('HSET', key, 'probe_until', now + probe_ms)
  return 1, 0, 'probe'
end
