-- Admit one request: the generation check, then one token from the caller's rate bucket.
-- KEYS: the agent's generation, (identity x target) bucket (absent: no rate limit to take
--       from). Both carry the tenant as hash tag: one slot.
-- ARGV: the token's generation, rate per s, burst.
-- Returns {revoked (0/1), allowed (0/1), wait ms}. A token whose generation is not the
-- agent's current one (absent: 0) is revoked and takes nothing from its bucket. The bucket
-- refills by Redis's own clock, so replicas never disagree about it, and expires once it
-- would be full again.
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if current ~= tonumber(ARGV[1]) then
  return {1, 0, 0}
end
if #KEYS < 2 then
  return {0, 1, 0}
end
local rate = tonumber(ARGV[2])
local burst = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local state = redis.call('HMGET', KEYS[2], 'tokens', 'at')
local tokens = tonumber(state[1]) or burst
local at = tonumber(state[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - at) * rate / 1000)
local allowed = 0
local wait = 0
if tokens >= 1 then
  tokens = tokens - 1
  allowed = 1
else
  wait = math.ceil((1 - tokens) * 1000 / rate)
end
redis.call('HSET', KEYS[2], 'tokens', tostring(tokens), 'at', now)
redis.call('PEXPIRE', KEYS[2], math.ceil(burst * 1000 / rate) + 1000)
return {0, allowed, wait}
