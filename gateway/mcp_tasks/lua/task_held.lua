-- Shows a running task held for a person's approval (`gateway.approvals`): `input_required`
-- with a message naming the approval while held, `working` again once released; a task that
-- ended (or another state) is left as it is.
--- KEYS: task_key
--- ARGV: held, message, now_ms
-- held: '1' while the call waits for approval, '0' once released; message: the task's
-- statusMessage meanwhile ('' once released). Returns 1 when changed, else 0.
local status = redis.call('HGET', task_key, 'status')
if held == '1' and status == 'working' then
  redis.call('HSET', task_key, 'status', 'input_required', 'message', message, 'updated', now_ms)
  return 1
end
if held == '0' and status == 'input_required' then
  redis.call('HSET', task_key, 'status', 'working', 'message', message, 'updated', now_ms)
  return 1
end
return 0
