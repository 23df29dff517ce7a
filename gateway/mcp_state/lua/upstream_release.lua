-- Give up a listener's claim on the upstream subscription of one resource (it unsubscribed):
-- only its own, so a claim another listener has taken since is left alone.
--- KEYS: owner
--- ARGV: listener
-- owner: conclave:mcp:sub:upstream:<source>:<uri>, the holding listener's id.
-- Returns 1 when the claim was `listener`'s and is gone, else 0.
if redis.call('GET', owner) == listener then
  redis.call('DEL', owner)
  return 1
end
return 0
