-- Moves an MCP task from `working` to a terminal status, once: the first of the runner's
-- outcome, a cancel and a take-over's verdict wins; the others change nothing. The lease
-- goes with it, and the outcome's bytes are charged to the tenant (tenant_bytes.lua).
-- KEYS[1] the task's hash   KEYS[2] its lease
-- KEYS[3] the tenant's usage   KEYS[4] its expiring ledger   KEYS[5] the ledger's sizes
-- ARGV[1] the terminal status   ARGV[2] the outcome (JSON, or '')   ARGV[3] the message
-- ARGV[4] now (unix ms)
-- Returns 1 when this call ended the task, 0 when it had ended (or expired) before.
local task = redis.call('HMGET', KEYS[1], 'status', 'created', 'ttl')
if task[1] ~= 'working' then return 0 end
redis.call('HSET', KEYS[1], 'status', ARGV[1], 'outcome', ARGV[2], 'message', ARGV[3],
  'updated', ARGV[4])
redis.call('DEL', KEYS[2])
local expires = tonumber(task[2]) + tonumber(task[3])
tenant_bytes_charge(KEYS[3], KEYS[4], KEYS[5], KEYS[1], #ARGV[2] + #ARGV[3], expires, false)
return 1
