-- Read one key and log key -> version in the caller's read log, atomically.
--- KEYS: cfg, data, read_log, usage, ledger, sizes
--- ARGV: key, read_log_ttl_s, read_log_max, quota_bytes, reserve_bytes
-- usage, ledger, sizes: the tenant's quota usage, its expiring-record ledger, the ledger's
-- sizes. reserve_bytes: the store's reserve (0: none).
-- Returns {'OK', value, version, owner, lease expiry}, {'NSNF'}, or, when the key is new to
-- the read log (nothing is read or logged then): {'LOG_FULL', size} if the log already holds
-- the maximum, {'QUOTA', bytes used, bytes added} if the log entry would take the tenant over
-- its byte quota, {'STORE_FULL', used memory, maxmemory, reserve} if Redis is down to its
-- reserve. A read log is an expiring record: its bytes count in the tenant's usage (`held`).
-- The `tenant_bytes_*` functions (tenant_bytes.lua) are prepended to this script.
if redis.call('EXISTS', cfg) == 0 then return {'NSNF'} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local fresh = redis.call('EXISTS', read_log) == 0
local add = 0
if redis.call('HEXISTS', read_log, key) == 0 then
  local size = redis.call('HLEN', read_log)
  if size >= tonumber(read_log_max) then return {'LOG_FULL', size} end
  tenant_bytes_sweep(usage, ledger, sizes, now, 16)
  add = #key + READ_LOG_FIELD_BYTES + tenant_bytes_entry(ledger, read_log)
  local used = tenant_bytes_used(usage)
  if used + add > tonumber(quota_bytes) then return {'QUOTA', used, add} end
  local full = tenant_bytes_store_full(add, tonumber(reserve_bytes))
  if full then return full end
  add = #key + READ_LOG_FIELD_BYTES
end
local d = redis.call('HMGET', data, 'val', 'ver', 'owner', 'lexp')
local ver = tonumber(d[2]) or 0
redis.call('HSET', read_log, key, ver)
redis.call('EXPIRE', read_log, read_log_ttl_s)
tenant_bytes_charge(usage, ledger, sizes, read_log, add, now + tonumber(read_log_ttl_s) * 1000, fresh)
local owner, lexp = d[3], tonumber(d[4]) or 0
if not owner or owner == '' or lexp <= now then owner, lexp = '', 0 end
return {'OK', d[1] or '', ver, owner, lexp}
