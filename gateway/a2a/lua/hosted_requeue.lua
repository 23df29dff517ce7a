-- A task goes back to its agent's queue: its worker's lease ended by now_ms (the agent is
-- idempotent: another worker runs it again), or its caller answered the input it asked for
-- (then `from` names the interrupted states and `message` is the answer).
--- KEYS: task, history, events, leases, queue
--- ARGV: id, status, now_ms, message
-- status: the submitted status's JSON; message: the caller's message's JSON, or '' (a lapse).
-- Returns {'OK'}, or {'NO', state} when the task is in no state to go back.
local held = redis.call('HMGET', task, 'state', 'lease_until')
if not held[1] then return {'NO', ''} end
if message == '' then
  if held[1] ~= 'TASK_STATE_WORKING' or tonumber(held[2] or '0') >= tonumber(now_ms) then
    if held[1] ~= 'TASK_STATE_WORKING' then redis.call('ZREM', leases, id) end
    return {'NO', held[1]}
  end
else
  if held[1] ~= 'TASK_STATE_INPUT_REQUIRED' and held[1] ~= 'TASK_STATE_AUTH_REQUIRED' then
    return {'NO', held[1]}
  end
  redis.call('RPUSH', history, message)
end
redis.call('HSET', task, 'state', 'TASK_STATE_SUBMITTED', 'status', status, 'lease_until', 0)
redis.call('ZREM', leases, id)
redis.call('RPUSH', queue, id)
hosted_event(task, events, 'status', status)
return {'OK'}
