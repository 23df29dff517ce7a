-- Moves an MCP task from `working` (or `input_required`) to a terminal status, once: the
-- first of the runner's outcome, a cancel and a take-over's verdict wins; the others change
-- nothing. The lease goes with it, and the outcome's bytes are charged to the tenant
-- (tenant_bytes.lua).
--- KEYS: task_key, lease_key, usage_key, expiring_key, sizes_key
--- ARGV: status, outcome, message, now_ms
-- task_key: the task's hash (cc:{t:<tenant>}:task:<id>); lease_key: its lease;
-- usage_key, expiring_key, sizes_key: the tenant's usage, expiring ledger, its sizes.
-- outcome: JSON, or ''; now_ms: unix ms.
-- Returns 1 when this call ended the task, 0 when it had ended (or expired) before.
local task = redis.call('HMGET', task_key, 'status', 'created', 'ttl')
if task[1] ~= 'working' and task[1] ~= 'input_required' then return 0 end
redis.call('HSET', task_key, 'status', status, 'outcome', outcome, 'message', message,
  'updated', now_ms)
redis.call('DEL', lease_key)
local expires = tonumber(task[2]) + tonumber(task[3])
local added = #outcome + #message
tenant_bytes_charge(usage_key, expiring_key, sizes_key, task_key, added, expires, false)
return 1
