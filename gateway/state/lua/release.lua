-- Release the caller's lease on one key. Releasing a free or lapsed lease is a no-op; a live
-- lease of another agent is refused. The fencing token stays, so it keeps increasing.
--- KEYS: cfg, data
--- ARGV: agent
if redis.call('EXISTS', cfg) == 0 then return {'NSNF'} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local d = redis.call('HMGET', data, 'owner', 'lexp', 'ver')
local owner, lexp = d[1] or '', tonumber(d[2]) or 0
if owner == agent then
  redis.call('HDEL', data, 'owner', 'lexp')
  return {'OK'}
end
if owner ~= '' and lexp > now then
  return {'LEASE_HELD', owner, lexp, tonumber(d[3]) or 0}
end
return {'OK'}
