-- Function hedge_deposit(key, share, cap, ttl_ms): one finished call of an identity earns it
-- `share` of a hedge, up to `cap` held (loaded before outcome.lua, which calls it).
--   key: the identity's hedge bucket.  share, cap: millionths of a hedge.  ttl_ms: the bucket
--   is forgotten this long after the identity's last call.
local function hedge_deposit(key, share, cap, ttl_ms)
  local tokens = tonumber(redis.call('HGET', key, 'tokens') or '0')
  redis.call('HSET', key, 'tokens', math.min(cap, tokens + share))
  redis.call('HINCRBY', key, 'calls', 1)
  redis.call('PEXPIRE', key, ttl_ms)
end
