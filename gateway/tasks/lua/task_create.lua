-- Creates an MCP task's record and takes its lease for the replica that runs it; the record's
-- bytes are charged to its tenant as an expiring record (tenant_bytes.lua, prepended).
-- KEYS[1] the task's hash (cc:{t:<tenant>}:task:<id>)   KEYS[2] its lease
-- KEYS[3] the tenant's usage   KEYS[4] its expiring ledger   KEYS[5] the ledger's sizes
-- ARGV[1] the owner (agent)   ARGV[2] the call (JSON)   ARGV[3] now (unix ms)
-- ARGV[4] the record's TTL (ms)   ARGV[5] the poll interval (ms)   ARGV[6] the replica
-- ARGV[7] the lease (ms)   ARGV[8] the status message   ARGV[9] the tenant's byte quota
-- Returns {'OK'}, or {'QUOTA', bytes used, bytes the task would add} (nothing written).
local now = tonumber(ARGV[3])
local expires = now + tonumber(ARGV[4])
local add = #KEYS[1] + #ARGV[1] + #ARGV[2] + #ARGV[8] + 160
tenant_bytes_sweep(KEYS[3], KEYS[4], KEYS[5], now, 16)
local used = tenant_bytes_used(KEYS[3])
if used + add > tonumber(ARGV[9]) then return {'QUOTA', used, add} end
redis.call('HSET', KEYS[1], 'agent', ARGV[1], 'status', 'working', 'message', ARGV[8],
  'created', ARGV[3], 'updated', ARGV[3], 'ttl', ARGV[4], 'poll', ARGV[5], 'call', ARGV[2],
  'attempts', 1)
redis.call('PEXPIREAT', KEYS[1], expires)
redis.call('SET', KEYS[2], ARGV[6], 'PX', ARGV[7])
tenant_bytes_charge(KEYS[3], KEYS[4], KEYS[5], KEYS[1], add, expires, true)
return {'OK'}
