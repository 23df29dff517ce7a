-- A worker's write to its task, fenced: only the holder of the current token, before its
-- lease ends, writes; a working state renews the lease (with nothing else, a heartbeat: no
-- event), any other ends it (a final state also drops the task's deadline).
--- KEYS: task, history, artifacts, events, leases, deadlines
--- ARGV: id, token, now_ms, lease_ms, state, status, message, artifact, answer
-- status: the new status's JSON; message: the agent's message's JSON, or '' (appended to
-- the history); artifact: JSON, or ''; answer: '1' when the message is the agent's whole
-- answer (SendMessage answers it alone, not the task), else ''. An artifact written while
-- the task stays working is an artifact event alone: its status did not change. An artifact
-- whose artifactId the task holds already replaces it and the chunks appended to it (A2A:
-- not appended), so a worker that runs a task again after another died writes each artifact
-- once; a chunk that appends (`{"artifact": ..., "append": true}`, gateway.a2a.artifact_chunks)
-- is pushed, and merged with its artifact when the task is read.
-- Returns {'OK', lease end (0: none)}, {'CANCELED'}, {'ENDED', state}, {'FENCED'} or {'GONE'}.
local held = redis.call('HMGET', task, 'token', 'state', 'lease_until')
if not held[1] then return {'GONE'} end
if held[1] ~= token then return {'FENCED'} end
if held[2] == 'TASK_STATE_CANCELED' then return {'CANCELED'} end
if hosted_ended(held[2]) then return {'ENDED', held[2]} end
if held[2] ~= 'TASK_STATE_WORKING' or tonumber(held[3] or '0') < tonumber(now_ms) then
  return {'FENCED'}
end
if state == 'TASK_STATE_WORKING' and message == '' and artifact == '' then
  -- a heartbeat: the lease renewed, nothing for the task's subscribers
  local expires = tonumber(now_ms) + tonumber(lease_ms)
  redis.call('HSET', task, 'lease_until', expires)
  redis.call('ZADD', leases, expires, id)
  return {'OK', expires}
end
local ttl = redis.call('TTL', task)
if message ~= '' then
  redis.call('RPUSH', history, message)
  if ttl > 0 then redis.call('EXPIRE', history, ttl) end
end
if artifact ~= '' then
  local written = cjson.decode(artifact)
  if written['append'] == true then
    redis.call('RPUSH', artifacts, artifact)  -- a chunk: merged with its artifact when read
  else
    local id = artifact_id(written)
    local at = nil
    local stale = 0
    for i, held_artifact in ipairs(redis.call('LRANGE', artifacts, 0, -1)) do
      if id ~= nil and artifact_id(cjson.decode(held_artifact)) == id then
        if at == nil then
          at = i - 1
        else  -- a chunk an earlier run appended to it: dropped with the artifact it grew
          redis.call('LSET', artifacts, i - 1, 'stale')
          stale = stale + 1
        end
      end
    end
    if at ~= nil then
      redis.call('LSET', artifacts, at, artifact)
      if stale > 0 then redis.call('LREM', artifacts, 0, 'stale') end
    else
      redis.call('RPUSH', artifacts, artifact)
    end
  end
  if ttl > 0 then redis.call('EXPIRE', artifacts, ttl) end
  hosted_event(task, events, 'artifact', artifact)
end
if answer == '1' then redis.call('HSET', task, 'answer', message) end
if state ~= 'TASK_STATE_WORKING' or message ~= '' then
  redis.call('HSET', task, 'state', state, 'status', status)
  hosted_event(task, events, 'status', status)
end
if state == 'TASK_STATE_WORKING' then
  local expires = tonumber(now_ms) + tonumber(lease_ms)
  redis.call('HSET', task, 'lease_until', expires)
  redis.call('ZADD', leases, expires, id)
  return {'OK', expires}
end
redis.call('HSET', task, 'lease_until', 0)
redis.call('ZREM', leases, id)
if hosted_ended(state) then redis.call('ZREM', deadlines, id) end
return {'OK', 0}
