-- Drops a task's question once its client answered it (or the call stopped waiting); the
-- task is back to `working` when no question is left (task_ask_input.lua).
--- KEYS: task_key, input_key
--- ARGV: input_id, now_ms
-- Returns 1 when the task went back to working, 0 otherwise.
redis.call('HDEL', input_key, input_id)
if redis.call('HLEN', input_key) > 0 then return 0 end
if redis.call('HGET', task_key, 'status') ~= 'input_required' then return 0 end
redis.call('HSET', task_key, 'status', 'working', 'updated', now_ms)
return 1
