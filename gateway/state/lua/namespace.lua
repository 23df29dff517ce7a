-- Create a namespace with its config; the same config again is a no-op, another is refused.
-- KEYS: cfg.  ARGV: mode, validate_reads ('1' or '0').
local d = redis.call('HMGET', KEYS[1], 'mode', 'validate_reads')
if not d[1] then
  redis.call('HSET', KEYS[1], 'mode', ARGV[1], 'validate_reads', ARGV[2])
  return {'CREATED'}
end
if d[1] == ARGV[1] and d[2] == ARGV[2] then return {'EXISTS'} end
return {'DIFFERENT', d[1], d[2]}
