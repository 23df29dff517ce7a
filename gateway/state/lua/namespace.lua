-- Create a namespace with its config; the same config again is a no-op, another is refused.
--- KEYS: cfg, usage
--- ARGV: mode, validate_reads, quota_bytes, reserve_bytes
-- usage: the tenant's quota usage. validate_reads: '1' or '0'. reserve_bytes: the store's
-- reserve (0: none).
-- A new namespace's config hash counts in the tenant's usage (`meta`, for good): creating one
-- over the byte quota is refused {'QUOTA', bytes used, bytes added}, into Redis's reserve
-- {'STORE_FULL', used memory, maxmemory, reserve}.
-- The `tenant_bytes_*` functions (tenant_bytes.lua) are prepended to this script.
local d = redis.call('HMGET', cfg, 'mode', 'validate_reads')
if not d[1] then
  local add = #cfg + DATA_KEY_BYTES
  local used = tenant_bytes_used(usage)
  if used + add > tonumber(quota_bytes) then return {'QUOTA', used, add} end
  local full = tenant_bytes_store_full(add, tonumber(reserve_bytes))
  if full then return full end
  redis.call('HSET', cfg, 'mode', mode, 'validate_reads', validate_reads)
  redis.call('HINCRBY', usage, 'meta', add)
  return {'CREATED'}
end
if d[1] == mode and d[2] == validate_reads then return {'EXISTS'} end
return {'DIFFERENT', d[1], d[2]}
