-- Take one hedge from an identity's hedge budget, if it holds one.
-- KEYS: the identity's hedge bucket (a hash: tokens, in millionths of a hedge; calls; hedges).
-- ARGV: what one hedge costs (millionths).
-- Returns 1 when a hedge was taken, 0 when the budget is spent.
local cost = tonumber(ARGV[1])
local tokens = tonumber(redis.call('HGET', KEYS[1], 'tokens') or '0')
if tokens < cost then return 0 end
redis.call('HINCRBY', KEYS[1], 'tokens', -cost)
redis.call('HINCRBY', KEYS[1], 'hedges', 1)
return 1
