-- Read one key and log key -> version in the caller's read log, atomically.
-- KEYS: cfg, data key, read log.  ARGV: key, read log ttl (s), read log max keys.
-- Returns {'OK', value, version, owner, lease expiry}, {'NSNF'}, or {'LOG_FULL', size} when
-- the key is new to a read log that already holds the maximum (nothing is read or logged).
if redis.call('EXISTS', KEYS[1]) == 0 then return {'NSNF'} end
if redis.call('HEXISTS', KEYS[3], ARGV[1]) == 0 then
  local size = redis.call('HLEN', KEYS[3])
  if size >= tonumber(ARGV[3]) then return {'LOG_FULL', size} end
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local d = redis.call('HMGET', KEYS[2], 'val', 'ver', 'owner', 'lexp')
local ver = tonumber(d[2]) or 0
redis.call('HSET', KEYS[3], ARGV[1], ver)
redis.call('EXPIRE', KEYS[3], ARGV[2])
local owner, lexp = d[3], tonumber(d[4]) or 0
if not owner or owner == '' or lexp <= now then owner, lexp = '', 0 end
return {'OK', d[1] or '', ver, owner, lexp}
