-- Acquire (or, for the current owner, renew) leases on keys, all or none.
-- KEYS: cfg, data keys...  ARGV: agent, ttl (ms), key names...
-- A new grant or a takeover of an expired lease increments the key's fencing token; a renewal
-- by the live owner keeps it, so the owner's pending writes stay valid.
if redis.call('EXISTS', KEYS[1]) == 0 then return {'NSNF'} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local agent, ttl = ARGV[1], tonumber(ARGV[2])
local held = {}
local state = {}
for i = 2, #KEYS do
  local d = redis.call('HMGET', KEYS[i], 'owner', 'lexp', 'fence', 'ver')
  local owner, lexp = d[1] or '', tonumber(d[2]) or 0
  local live = owner ~= '' and lexp > now
  state[i] = {live = live and owner == agent, fence = tonumber(d[3]) or 0}
  if live and owner ~= agent then
    held[#held + 1] = {key = ARGV[i + 1], reason = 'leased by another agent', owner = owner,
                       lease_expires_at_ms = lexp, current_version = tonumber(d[4]) or 0}
  end
end
if #held > 0 then return {'LEASE_HELD', cjson.encode(held)} end
local grants = {}
for i = 2, #KEYS do
  local fence = state[i].fence
  if not state[i].live then fence = redis.call('HINCRBY', KEYS[i], 'fence', 1) end
  redis.call('HSET', KEYS[i], 'owner', agent, 'lexp', now + ttl)
  grants[#grants + 1] = {key = ARGV[i + 1], owner = agent, fencing_token = fence,
                         expires_at_ms = now + ttl}
end
return {'OK', cjson.encode(grants)}
