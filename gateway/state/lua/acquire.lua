-- Acquire (or, for the current owner, renew) leases on keys, all or none.
-- KEYS: cfg, the tenant's quota usage, data keys...
-- ARGV: agent, ttl (ms), quota bytes, store reserve (bytes; 0: none), key names...
-- A new grant or a takeover of an expired lease increments the key's fencing token; a renewal
-- by the live owner keeps it, so the owner's pending writes stay valid.
-- A lease on a key that has no data hash yet creates one (it keeps the fencing token for
-- good): its bytes count in the tenant's usage (`meta`), so a grant that would take the tenant
-- over its byte quota, or Redis into its reserve, is refused whole: {'QUOTA', bytes used,
-- bytes added} or {'STORE_FULL', used memory, maxmemory, reserve}.
-- The `tenant_bytes_*` functions (tenant_bytes.lua) are prepended to this script.
if redis.call('EXISTS', KEYS[1]) == 0 then return {'NSNF'} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local agent, ttl = ARGV[1], tonumber(ARGV[2])
local FIRST = 3  -- the first data key
local held = {}
local state = {}
local add = 0
for i = FIRST, #KEYS do
  local d = redis.call('HMGET', KEYS[i], 'owner', 'lexp', 'fence', 'ver')
  local owner, lexp = d[1] or '', tonumber(d[2]) or 0
  local live = owner ~= '' and lexp > now
  state[i] = {live = live and owner == agent, fence = tonumber(d[3]) or 0}
  if live and owner ~= agent then
    held[#held + 1] = {key = ARGV[i + 2], reason = 'leased by another agent', owner = owner,
                       lease_expires_at_ms = lexp, current_version = tonumber(d[4]) or 0}
  end
  if redis.call('EXISTS', KEYS[i]) == 0 then add = add + #KEYS[i] + DATA_KEY_BYTES end
end
if #held > 0 then return {'LEASE_HELD', cjson.encode(held)} end
if add > 0 then
  local used = tenant_bytes_used(KEYS[2])
  if used + add > tonumber(ARGV[3]) then return {'QUOTA', used, add} end
  local full = tenant_bytes_store_full(add, tonumber(ARGV[4]))
  if full then return full end
  redis.call('HINCRBY', KEYS[2], 'meta', add)
end
local grants = {}
for i = FIRST, #KEYS do
  local fence = state[i].fence
  if not state[i].live then fence = redis.call('HINCRBY', KEYS[i], 'fence', 1) end
  redis.call('HSET', KEYS[i], 'owner', agent, 'lexp', now + ttl)
  grants[#grants + 1] = {key = ARGV[i + 2], owner = agent, fencing_token = fence,
                         expires_at_ms = now + ttl}
end
return {'OK', cjson.encode(grants)}
