-- (After breaker_gate.lua.) Admit one request, everything the gateway must know before it starts a call, in one script:
-- the token's generation, one token from the agent's and from the tenant's rate bucket, a
-- place among the tenant's calls in flight, the tool's circuit breaker, the latency windows
-- the grant is computed from, and the hedges the caller holds.
--- KEYS: generation, parts...
--- ARGV: token_generation, buckets, agent_rate, agent_burst, tenant_rate, tenant_burst, breaker_asked, hedge_asked, now_ms, probe_lease_ms, windows_after, in_flight_max, call_id, hold_ms, in_flight_wait_ms, peek, held...
-- KEYS: the agent's generation; then (`parts`) n buckets (agent x target, tenant x target);
--       then the tenant's in-flight set, when asked; then the caller's hedge bucket, when
--       asked; then the breaker, when asked; then each latency window to read and its
--       version, in pairs. All carry the tenant as hash tag: one cluster slot.
-- ARGV: the token's generation, n buckets (0-2), agent rate per s, agent burst, tenant rate
--       per s, tenant burst, breaker asked (0/1), hedge bucket asked (0/1), now (ms, the
--       gateway's clock, as the breaker and the windows are written with it), probe lease
--       (ms), windows' oldest score (exclusive), in-flight cap (0: not asked), the call's
--       in-flight id, how long its place is held at most (ms), the wait to suggest when the
--       tenant is full (ms), peek ('1': check the generation and the buckets only, take
--       nothing: a request whose body is not read yet is refused early, and admitted again
--       once it is read); then (`held`) two a window: the version of the estimate the gateway
--       holds and how far the window may have moved past it before its members are read (0:
--       read them whatever the version).
-- Returns {refused token (0: no, 1: revoked, 2: agent unknown here), allowed (0/1), wait ms,
-- limited by ('agent'|'tenant'|'in_flight'|''), breaker admitted (0/1), breaker wait ms,
-- breaker state, windows..., hedges}: each window as one array, its version (0: no window),
-- whether its members were read (0/1) and then they; last, when asked, the caller's hedge
-- tokens (a string).
-- A revoked token takes nothing; a refused bucket takes from neither; the breaker, the
-- windows and the hedges are read only for an admitted call. Buckets refill by Redis's own
-- clock, so replicas never disagree about them, and expire once full again.
-- The in-flight set (a sorted set: call id -> the Redis time its place lapses) is counted
-- across every replica; the account stage removes a call when it ends, and a call whose
-- replica died lapses at its score, so a crash never keeps a tenant's places. A tenant at
-- its cap is refused before any bucket is taken.
local stored = redis.call('GET', generation)
if not stored and tonumber(token_generation) > 0 then
  -- Registering moves the generation to 1 or more: a token of a later generation whose
  -- agent has none here was issued against another store (reset, or another gateway's).
  return {2, 0, 0, '', 0, 0, ''}
end
if tonumber(stored or '0') ~= tonumber(token_generation) then
  return {1, 0, 0, '', 0, 0, ''}
end

local t = redis.call('TIME')
local clock = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local buckets = tonumber(buckets)
local limits = {{agent_rate, agent_burst}, {tenant_rate, tenant_burst}}
local names = {'agent', 'tenant'}
local levels = {}
for i = 1, buckets do
  local rate, burst = tonumber(limits[i][1]), tonumber(limits[i][2])
  local state = redis.call('HMGET', parts[i], 'tokens', 'at')
  local tokens = tonumber(state[1]) or burst
  local at = tonumber(state[2]) or clock
  tokens = math.min(burst, tokens + math.max(0, clock - at) * rate / 1000)
  if tokens < 1 then
    return {0, 0, math.ceil((1 - tokens) * 1000 / rate), names[i], 0, 0, ''}
  end
  levels[i] = {tokens - 1, math.ceil(burst * 1000 / rate) + 1000}
end
if peek == '1' then return {0, 1, 0, '', 1, 0, 'closed'} end
local next_key = 1 + buckets
in_flight_max = tonumber(in_flight_max)
if in_flight_max > 0 then
  local calls = parts[next_key]
  next_key = next_key + 1
  redis.call('ZREMRANGEBYSCORE', calls, '-inf', clock)
  if redis.call('ZCARD', calls) >= in_flight_max then
    return {0, 0, tonumber(in_flight_wait_ms), 'in_flight', 0, 0, ''}
  end
  local hold = tonumber(hold_ms)
  redis.call('ZADD', calls, clock + hold, call_id)
  if redis.call('PTTL', calls) < hold then redis.call('PEXPIRE', calls, hold) end
end
for i = 1, buckets do
  redis.call('HSET', parts[i], 'tokens', tostring(levels[i][1]), 'at', clock)
  redis.call('PEXPIRE', parts[i], levels[i][2])
end

local reply = {0, 1, 0, '', 1, 0, 'closed'}
local now = tonumber(now_ms)
local hedge_bucket = nil
if hedge_asked == '1' then
  hedge_bucket = parts[next_key]
  next_key = next_key + 1
end
if breaker_asked == '1' then
  reply[5], reply[6], reply[7] = breaker_gate(parts[next_key], now, tonumber(probe_lease_ms))
  next_key = next_key + 1
  if reply[5] == 0 then return reply end
end
local w = 0
for k = next_key, #parts, 2 do
  w = w + 1
  local version = tonumber(redis.call('GET', parts[k + 1]) or '0')
  local moved = version - tonumber(held[2 * w - 1])
  local read = {version, 0}
  if moved < 0 or moved >= tonumber(held[2 * w]) then
    read[2] = 1
    local members = redis.call('ZRANGEBYSCORE', parts[k], '(' .. windows_after, '+inf')
    for i = 1, #members do read[i + 2] = members[i] end
  end
  reply[#reply + 1] = read
end
if hedge_bucket then
  reply[#reply + 1] = redis.call('HGET', hedge_bucket, 'tokens') or '0'
end
return reply
