-- Move an agent's generation on, which refuses every token issued at an earlier one.
-- A script (not a bare INCR) so that it runs as a `PooledScript`, whose Redis WAIT
-- (durability "replicated") runs on the same connection.
--- KEYS: generation
--- ARGV: none
-- generation: the agent's generation key.
-- Returns the new generation.
return redis.call('INCR', generation)
