-- Take one hedge from an identity's hedge budget, if it holds one.
--- KEYS: bucket
--- ARGV: cost
-- bucket: the identity's hedge bucket (a hash: tokens, in millionths of a hedge; calls;
-- hedges). cost: what one hedge costs (millionths).
-- Returns 1 when a hedge was taken, 0 when the budget is spent.
cost = tonumber(cost)
local tokens = tonumber(redis.call('HGET', bucket, 'tokens') or '0')
if tokens < cost then return 0 end
redis.call('HINCRBY', bucket, 'tokens', -cost)
redis.call('HINCRBY', bucket, 'hedges', 1)
return 1
