-- The gateway ends a task that has not ended: its caller cancelled it, its deadline passed,
-- or (when = a unix ms) its worker's lease had ended by then and the agent is not
-- idempotent. A worker's next write learns it (hosted_write.lua).
--- KEYS: task, events, leases, deadlines
--- ARGV: id, state, status, when
-- state, status: the end (its status's JSON); when: 'any', or the lapse's unix ms.
-- Returns {'OK'}, {'ENDED', state} (it had ended), {'LIVE'} (its lease holds) or {'GONE'}.
local held = redis.call('HMGET', task, 'state', 'lease_until')
if not held[1] then return {'GONE'} end
if hosted_ended(held[1]) then
  redis.call('ZREM', leases, id)
  redis.call('ZREM', deadlines, id)
  return {'ENDED', held[1]}
end
if when ~= 'any' and (held[1] ~= 'TASK_STATE_WORKING'
    or tonumber(held[2] or '0') >= tonumber(when)) then
  if held[1] ~= 'TASK_STATE_WORKING' then redis.call('ZREM', leases, id) end
  return {'LIVE'}
end
redis.call('HSET', task, 'state', state, 'status', status, 'lease_until', 0)
redis.call('ZREM', leases, id)
redis.call('ZREM', deadlines, id)
hosted_event(task, events, 'status', status)
return {'OK'}
