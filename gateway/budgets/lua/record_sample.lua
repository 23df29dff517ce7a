-- Function record_sample(key, version_key, member, now, window_ms, max_samples): add one
-- call's duration to a tool's latency window and trim the window by age and by count, in one
-- step, and move the window's version. Loaded before the bodies that call it
-- (latency_record.lua, outcome.lua).
--   key: the window (a sorted set scored by when each call ended).  version_key: the
--   window's version, +1 per sample; it starts at the Redis clock (in microseconds) when it
--   is made, so a window that lapsed and was made again never repeats a version a gateway
--   still holds an estimate of.  member: the sample.  now: ms.  window_ms: the age past
--   which samples go.  max_samples: the most kept.
local function record_sample(key, version_key, member, now, window_ms, max_samples)
  redis.call('ZADD', key, now, member)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window_ms)
  redis.call('ZREMRANGEBYRANK', key, 0, -(max_samples + 1))
  redis.call('PEXPIRE', key, window_ms)
  if redis.call('EXISTS', version_key) == 0 then
    local t = redis.call('TIME')
    redis.call('SET', version_key, t[1] .. string.format('%06d', tonumber(t[2])))
  end
  redis.call('INCR', version_key)
  redis.call('PEXPIRE', version_key, window_ms)
end
