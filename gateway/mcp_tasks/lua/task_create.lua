-- Creates an MCP task's record and takes its lease for the replica that runs it; the record's
-- bytes are charged to its tenant as an expiring record (tenant_bytes.lua, prepended).
--- KEYS: task_key, lease_key, usage_key, expiring_key, sizes_key
--- ARGV: agent, call, now_ms, ttl_ms, poll_ms, replica, lease_ms, message, quota_bytes
-- task_key: the task's hash (cc:{t:<tenant>}:task:<id>); lease_key: its lease;
-- usage_key, expiring_key, sizes_key: the tenant's usage, expiring ledger, its sizes.
-- call: JSON; now_ms: unix ms; quota_bytes: the tenant's byte quota.
-- Returns {'OK'}, or {'QUOTA', bytes used, bytes the task would add} (nothing written).
local now = tonumber(now_ms)
local expires = now + tonumber(ttl_ms)
local add = #task_key + #agent + #call + #message + 160
tenant_bytes_sweep(usage_key, expiring_key, sizes_key, now, 16)
local used = tenant_bytes_used(usage_key)
if used + add > tonumber(quota_bytes) then return {'QUOTA', used, add} end
redis.call('HSET', task_key, 'agent', agent, 'status', 'working', 'message', message,
  'created', now_ms, 'updated', now_ms, 'ttl', ttl_ms, 'poll', poll_ms, 'call', call,
  'attempts', 1)
redis.call('PEXPIREAT', task_key, expires)
redis.call('SET', lease_key, replica, 'PX', lease_ms)
tenant_bytes_charge(usage_key, expiring_key, sizes_key, task_key, add, expires, true)
return {'OK'}
