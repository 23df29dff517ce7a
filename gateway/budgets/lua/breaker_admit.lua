-- Let a call through a tool's circuit breaker, or say how long it stays shut.
-- KEYS: breaker.  ARGV: now (ms), probe lease (ms).
-- Returns {admitted (0/1), wait ms, state}: state is 'closed', 'open', 'half_open' (another
-- probe holds the lease) or 'probe'. A half-open breaker admits one probe per lease, across
-- all replicas; a probe that never reports frees the lease when it runs out.
local key = KEYS[1]
local now = tonumber(ARGV[1])
local open_until = tonumber(redis.call('HGET', key, 'open_until') or '0')
if open_until == 0 then return {1, 0, 'closed'} end
if now < open_until then return {0, open_until - now, 'open'} end
local probe_until = tonumber(redis.call('HGET', key, 'probe_until') or '0')
if probe_until > now then return {0, probe_until - now, 'half_open'} end
redis.call('HSET', key, 'probe_until', now + tonumber(ARGV[2]))
return {1, 0, 'probe'}
