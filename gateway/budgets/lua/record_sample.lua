-- Function record_sample(key, member, now, window_ms, max_samples): add one call's duration
-- to a tool's latency window and trim the window by age and by count, in one step. Loaded
-- before the bodies that call it (latency_record.lua, outcome.lua).
--   key: the window (a sorted set scored by when each call ended).  member: the sample.
--   now: ms.  window_ms: the age past which samples go.  max_samples: the most kept.
local function record_sample(key, member, now, window_ms, max_samples)
  redis.call('ZADD', key, now, member)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window_ms)
  redis.call('ZREMRANGEBYRANK', key, 0, -(max_samples + 1))
  redis.call('PEXPIRE', key, window_ms)
end
