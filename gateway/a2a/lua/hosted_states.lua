-- Shared by the hosted-task scripts: which A2A task states end a task.
local function hosted_ended(state)
  return state == 'TASK_STATE_COMPLETED' or state == 'TASK_STATE_FAILED'
    or state == 'TASK_STATE_CANCELED' or state == 'TASK_STATE_REJECTED'
end

-- An event on the task's stream (field 'status' or 'artifact', A2A JSON), kept short, and
-- expiring with the task.
local function hosted_event(task, events, field, json)
  redis.call('XADD', events, 'MAXLEN', '~', 1000, '*', field, json)
  local ttl = redis.call('TTL', task)
  if ttl > 0 then redis.call('EXPIRE', events, ttl) end
end

-- The artifactId of an artifact's list entry: the artifact itself, or a chunk holding it
-- (`{"artifact": ..., "append": ...}`: gateway.a2a.artifact_chunks).
local function artifact_id(entry)
  if entry['artifactId'] ~= nil then return entry['artifactId'] end
  if type(entry['artifact']) == 'table' then return entry['artifact']['artifactId'] end
  return nil
end
