-- Function record_outcome(key, now, ok, threshold, cooldown_ms): a tool breaker's state after
-- one call's outcome. Loaded before the bodies that call it (breaker_record.lua, outcome.lua).
--   key: the breaker.  now: ms.  ok: boolean, the call was evidence of a healthy tool.
--   threshold: failures in a row that open the breaker.  cooldown_ms: how long it stays open.
-- Returns 'closed' or 'open'. Any success closes it; a failure while open or half-open (the
-- probe) reopens it for another cool-down.
local function record_outcome(key, now, ok, threshold, cooldown_ms)
  if ok then redis.call('DEL', key) return 'closed' end
  local failures = redis.call('HINCRBY', key, 'failures', 1)
  local open_until = tonumber(redis.call('HGET', key, 'open_until') or '0')
  if open_until > 0 or failures >= threshold then
    redis.call('HSET', key, 'open_until', now + cooldown_ms, 'probe_until', 0)
    redis.call('PEXPIRE', key, cooldown_ms * 10)
    return 'open'
  end
  return 'closed'
end
