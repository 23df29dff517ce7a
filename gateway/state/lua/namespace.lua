-- Create a namespace with its config; the same config again is a no-op, another is refused.
-- KEYS: cfg, the tenant's quota usage.
-- ARGV: mode, validate_reads ('1' or '0'), quota bytes, store reserve (bytes; 0: none).
-- A new namespace's config hash counts in the tenant's usage (`meta`, for good): creating one
-- over the byte quota is refused {'QUOTA', bytes used, bytes added}, into Redis's reserve
-- {'STORE_FULL', used memory, maxmemory, reserve}.
-- The `tenant_bytes_*` functions (tenant_bytes.lua) are prepended to this script.
local d = redis.call('HMGET', KEYS[1], 'mode', 'validate_reads')
if not d[1] then
  local add = #KEYS[1] + DATA_KEY_BYTES
  local used = tenant_bytes_used(KEYS[2])
  if used + add > tonumber(ARGV[3]) then return {'QUOTA', used, add} end
  local full = tenant_bytes_store_full(add, tonumber(ARGV[4]))
  if full then return full end
  redis.call('HSET', KEYS[1], 'mode', ARGV[1], 'validate_reads', ARGV[2])
  redis.call('HINCRBY', KEYS[2], 'meta', add)
  return {'CREATED'}
end
if d[1] == ARGV[1] and d[2] == ARGV[2] then return {'EXISTS'} end
return {'DIFFERENT', d[1], d[2]}
