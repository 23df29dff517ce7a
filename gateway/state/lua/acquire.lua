-- Acquire (or, for the current owner, renew) leases on keys, all or none.
--- KEYS: cfg, usage, data...
--- ARGV: agent, ttl_ms, quota_bytes, reserve_bytes, names...
-- usage: the tenant's quota usage; data: the data keys of `names`, in their order.
-- reserve_bytes: the store's reserve (0: none).
-- A new grant or a takeover of an expired lease increments the key's fencing token; a renewal
-- by the live owner keeps it, so the owner's pending writes stay valid.
-- A lease on a key that has no data hash yet creates one (it keeps the fencing token for
-- good): its bytes count in the tenant's usage (`meta`), so a grant that would take the tenant
-- over its byte quota, or Redis into its reserve, is refused whole: {'QUOTA', bytes used,
-- bytes added} or {'STORE_FULL', used memory, maxmemory, reserve}.
-- The `tenant_bytes_*` functions (tenant_bytes.lua) are prepended to this script.
if redis.call('EXISTS', cfg) == 0 then return {'NSNF'} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ttl_ms)
local held = {}
local state = {}
local add = 0
for i = 1, #data do
  local d = redis.call('HMGET', data[i], 'owner', 'lexp', 'fence', 'ver')
  local owner, lexp = d[1] or '', tonumber(d[2]) or 0
  local live = owner ~= '' and lexp > now
  state[i] = {live = live and owner == agent, fence = tonumber(d[3]) or 0}
  if live and owner ~= agent then
    held[#held + 1] = {key = names[i], reason = 'leased by another agent', owner = owner,
                       lease_expires_at_ms = lexp, current_version = tonumber(d[4]) or 0}
  end
  if redis.call('EXISTS', data[i]) == 0 then add = add + #data[i] + DATA_KEY_BYTES end
end
if #held > 0 then return {'LEASE_HELD', cjson.encode(held)} end
if add > 0 then
  local used = tenant_bytes_used(usage)
  if used + add > tonumber(quota_bytes) then return {'QUOTA', used, add} end
  local full = tenant_bytes_store_full(add, tonumber(reserve_bytes))
  if full then return full end
  redis.call('HINCRBY', usage, 'meta', add)
end
local grants = {}
for i = 1, #data do
  local fence = state[i].fence
  if not state[i].live then fence = redis.call('HINCRBY', data[i], 'fence', 1) end
  redis.call('HSET', data[i], 'owner', agent, 'lexp', now + ttl)
  grants[#grants + 1] = {key = names[i], owner = agent, fencing_token = fence,
                         expires_at_ms = now + ttl}
end
return {'OK', cjson.encode(grants)}
