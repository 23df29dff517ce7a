-- Claim the gateway's upstream subscription of one resource for one listener (one replica's
-- session on the upstream), or keep it: the one listener that holds it subscribes on the
-- upstream and, when its last subscriber is gone, unsubscribes, so the upstream is told once.
-- A claim lapses `hold_ms` after it was last kept (its replica went away): another takes it.
--- KEYS: owner
--- ARGV: listener, hold_ms
-- owner: conclave:mcp:sub:upstream:<source>:<uri>, the holding listener's id.
-- Returns 1 when `listener` holds it now (claimed, or its own and kept), 0 when another does.
local current = redis.call('GET', owner)
if current == false then
  redis.call('SET', owner, listener, 'PX', hold_ms)
  return 1
end
if current == listener then
  redis.call('PEXPIRE', owner, hold_ms)
  return 1
end
return 0
