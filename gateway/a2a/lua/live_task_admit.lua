-- A tenant's new delegated task is admitted while fewer than `max` of its tasks are live, on
-- every replica alike: the live set holds each task until it ends (`live_task_release`) or
-- its `until_ms` passes (its caller's deadline, or its agent's timeout_s: an end the gateway
-- missed frees its place then).
--- KEYS: live
--- ARGV: ref, now_ms, until_ms, max, ttl_s
-- Returns {1, count} admitted (count with it), or {0, count} refused.
redis.call('ZREMRANGEBYSCORE', live, '-inf', now_ms)
local count = redis.call('ZCARD', live)
if count >= tonumber(max) then return {0, count} end
redis.call('ZADD', live, until_ms, ref)
redis.call('EXPIRE', live, ttl_s)
return {1, count + 1}
