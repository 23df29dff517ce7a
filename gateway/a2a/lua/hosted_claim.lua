-- A worker claims the next task of a hosted agent's queue: the first whose state is still
-- submitted (a cancelled one is skipped), now working, leased to the worker until
-- now + lease_ms under a new fencing token (the task's counter, which only grows).
--- KEYS: queue, leases
--- ARGV: prefix, now_ms, lease_ms, status
-- queue: the agent's list of task ids; leases: its zset id -> lease end (unix ms);
-- prefix: the agent's key prefix (every key of one agent shares its hash tag: one slot);
-- status: the working status's JSON.
-- Returns {id, token, lease end}, or nil when the queue holds nothing to claim.
while true do
  local id = redis.call('LPOP', queue)
  if not id then return false end
  local task = prefix .. 't:' .. id
  if redis.call('HGET', task, 'state') == 'TASK_STATE_SUBMITTED' then
    local token = redis.call('HINCRBY', task, 'token', 1)
    local expires = tonumber(now_ms) + tonumber(lease_ms)
    redis.call('HSET', task, 'state', 'TASK_STATE_WORKING', 'status', status,
      'lease_until', expires)
    redis.call('ZADD', leases, expires, id)
    hosted_event(task, prefix .. 'e:' .. id, 'status', status)
    return {id, token, expires}
  end
end
