-- Records a question a task's call asks its client (a request of the call's MCP server), and
-- moves the task to `input_required`, on a task still running: `tasks/get` shows it in
-- `inputRequests` until it is answered (task_input_answered.lua).
--- KEYS: task_key, input_key
--- ARGV: input_id, request, now_ms
-- task_key: the task's hash; input_key: its questions' hash (input id -> request JSON),
-- expiring with the task. request: {"method", "params"} JSON, at most REQUEST_LIMIT bytes
-- and MAX_PENDING_REQUESTS of them a call (sandbox.CallEvents bounds both, before this).
-- Returns 1 when recorded, 0 when the task has ended or gone.
local status = redis.call('HGET', task_key, 'status')
if status ~= 'working' and status ~= 'input_required' then return 0 end
redis.call('HSET', input_key, input_id, request)
redis.call('PEXPIRE', input_key, math.max(redis.call('PTTL', task_key), 1))
redis.call('HSET', task_key, 'status', 'input_required', 'updated', now_ms)
return 1
