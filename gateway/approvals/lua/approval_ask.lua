-- Holds a call for approval: its record, pending, listed among its tenant's pending ones,
-- unless the tenant already has `most_pending` calls waiting (then nothing is written).
--- KEYS: record_key, pending_key
--- ARGV: id, call, now_ms, expires_at_ms, keep_ms, most_pending
-- record_key: the approval's hash (cc:{t:<tenant>}:approval:<id>); pending_key: the tenant's
-- pending approvals (a sorted set of ids by expiry). call: the held call (JSON, what it was
-- asked as); keep_ms: how long a record is kept after it expires (its audit for `show`).
-- Returns 1 when held, 0 when the tenant has too many calls waiting.
redis.call('ZREMRANGEBYSCORE', pending_key, '-inf', now_ms)
if redis.call('ZCARD', pending_key) >= tonumber(most_pending) then return 0 end
redis.call('HSET', record_key, 'call', call, 'status', 'pending', 'expires', expires_at_ms)
redis.call('PEXPIRE', record_key, tonumber(expires_at_ms) - tonumber(now_ms) + tonumber(keep_ms))
redis.call('ZADD', pending_key, expires_at_ms, id)
return 1
