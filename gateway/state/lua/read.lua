-- Read one key and log key -> version in the caller's read log, atomically.
-- KEYS: cfg, data key, read log, the tenant's quota usage, its expiring-record ledger, the
--       ledger's sizes.
-- ARGV: key, read log ttl (s), read log max keys, quota bytes, store reserve (bytes; 0: none).
-- Returns {'OK', value, version, owner, lease expiry}, {'NSNF'}, or, when the key is new to
-- the read log (nothing is read or logged then): {'LOG_FULL', size} if the log already holds
-- the maximum, {'QUOTA', bytes used, bytes added} if the log entry would take the tenant over
-- its byte quota, {'STORE_FULL', used memory, maxmemory, reserve} if Redis is down to its
-- reserve. A read log is an expiring record: its bytes count in the tenant's usage (`held`).
-- The `tenant_bytes_*` functions (tenant_bytes.lua) are prepended to this script.
if redis.call('EXISTS', KEYS[1]) == 0 then return {'NSNF'} end
local usage, ledger, sizes = KEYS[4], KEYS[5], KEYS[6]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local fresh = redis.call('EXISTS', KEYS[3]) == 0
local add = 0
if redis.call('HEXISTS', KEYS[3], ARGV[1]) == 0 then
  local size = redis.call('HLEN', KEYS[3])
  if size >= tonumber(ARGV[3]) then return {'LOG_FULL', size} end
  tenant_bytes_sweep(usage, ledger, sizes, now, 16)
  add = #ARGV[1] + READ_LOG_FIELD_BYTES + tenant_bytes_entry(ledger, KEYS[3])
  local used = tenant_bytes_used(usage)
  if used + add > tonumber(ARGV[4]) then return {'QUOTA', used, add} end
  local full = tenant_bytes_store_full(add, tonumber(ARGV[5]))
  if full then return full end
  add = #ARGV[1] + READ_LOG_FIELD_BYTES
end
local d = redis.call('HMGET', KEYS[2], 'val', 'ver', 'owner', 'lexp')
local ver = tonumber(d[2]) or 0
redis.call('HSET', KEYS[3], ARGV[1], ver)
redis.call('EXPIRE', KEYS[3], ARGV[2])
tenant_bytes_charge(usage, ledger, sizes, KEYS[3], add, now + tonumber(ARGV[2]) * 1000, fresh)
local owner, lexp = d[3], tonumber(d[4]) or 0
if not owner or owner == '' or lexp <= now then owner, lexp = '', 0 end
return {'OK', d[1] or '', ver, owner, lexp}
