-- Commit several writes at once: every check and every write in this one script, so a commit
-- is applied entirely or not at all, and nothing can change between the checks and the writes.
-- KEYS: cfg, read log, history stream, idempotency key (or cfg again), write data keys...,
--       explicit read-set data keys...
-- ARGV: agent, session, n writes, m reads, has idempotency key ('1'/'0'), read log ttl (s),
--       idempotency ttl (s), history values (JSON object), key prefix,
--       then 5 per write: key, value JSON, delete ('1'/'0'), expected version or '',
--       fencing token or ''; then 2 per explicit read: key, version.
-- Logged reads are data keys named from the prefix: they share the namespace's hash tag, so
-- they live in the same cluster slot as the declared keys.
if redis.call('EXISTS', KEYS[1]) == 0 then return {'NSNF'} end
local agent, session = ARGV[1], ARGV[2]
local n, m = tonumber(ARGV[3]), tonumber(ARGV[4])
if ARGV[5] == '1' then
  local prior = redis.call('GET', KEYS[4])
  if prior then return {'REPLAY', prior} end
end
local cfg = redis.call('HMGET', KEYS[1], 'mode', 'validate_reads')
local owned, validate = cfg[1] == 'owned', cfg[2] ~= '0'
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

-- Refusals are collected for every key; the envelope's code is the one the caller must act
-- on first (a lost lease outranks a stale version).
local RANK = {STATE_CONFLICT = 1, LEASE_REQUIRED = 2, LEASE_HELD = 3, LEASE_EXPIRED = 4,
              FENCED = 5}
local conflicts, code, rank = {}, nil, 0
local function refuse(c, detail)
  conflicts[#conflicts + 1] = detail
  if RANK[c] > rank then code, rank = c, RANK[c] end
end

local writes = {}
for i = 1, n do
  local a = 9 + (i - 1) * 5
  local w = {key = ARGV[a + 1], val = ARGV[a + 2], del = ARGV[a + 3] == '1',
             expected = tonumber(ARGV[a + 4]), token = tonumber(ARGV[a + 5]), rkey = KEYS[4 + i]}
  local d = redis.call('HMGET', w.rkey, 'ver', 'owner', 'lexp', 'fence')
  w.ver = tonumber(d[1]) or 0
  local owner, lexp, fence = d[2] or '', tonumber(d[3]) or 0, tonumber(d[4]) or 0
  local live = owner ~= '' and lexp > now
  if owned or live or w.token then
    local x = {key = w.key, current_version = w.ver}
    if live then x.owner, x.lease_expires_at_ms = owner, lexp end
    if live and owner == agent then
      if w.token == nil then
        x.reason = 'no fencing token: send the token your lease was granted with'
        refuse('LEASE_REQUIRED', x)
      elseif w.token ~= fence then
        x.reason = 'fencing token ' .. w.token .. ' is not the current ' .. fence
        refuse('FENCED', x)
      end
    elseif live then
      if w.token == nil then
        x.reason = 'leased by another agent'
        refuse('LEASE_HELD', x)
      else
        x.reason = 'fencing token ' .. w.token .. ' is stale: another agent holds the lease'
        refuse('FENCED', x)
      end
    elseif w.token ~= nil and w.token == fence and owner == agent then
      x.reason = 'your lease expired at ' .. lexp
      refuse('LEASE_EXPIRED', x)
    elseif w.token ~= nil then
      x.reason = 'fencing token ' .. w.token .. ' is stale or its lease was released'
      refuse('FENCED', x)
    else
      x.reason = 'owned namespace: acquire a lease on the key first'
      refuse('LEASE_REQUIRED', x)
    end
  end
  if w.expected ~= nil and w.expected ~= w.ver then
    refuse('STATE_CONFLICT', {key = w.key, reason = 'expected_version is not current',
                              expected_version = w.expected, current_version = w.ver})
  end
  writes[i] = w
end

-- The reads this commit depends on: the caller's logged reads (when the namespace validates
-- reads) and the explicit read set (always).
local reads, checks = {}, {}
if validate then
  local logged = redis.call('HGETALL', KEYS[2])
  for i = 1, #logged, 2 do
    local v = tonumber(logged[i + 1])
    reads[logged[i]] = v
    checks[#checks + 1] = {logged[i], v, 'logged read'}
  end
end
local rbase = 9 + n * 5
for j = 1, m do
  local k, v = ARGV[rbase + (j - 1) * 2 + 1], tonumber(ARGV[rbase + (j - 1) * 2 + 2])
  if reads[k] ~= v then checks[#checks + 1] = {k, v, 'read_set'} end
  reads[k] = v
end
local prefix = ARGV[9]
for _, c in ipairs(checks) do
  local cur = tonumber(redis.call('HGET', prefix .. 'k:' .. c[1], 'ver')) or 0
  if cur ~= c[2] then
    refuse('STATE_CONFLICT', {key = c[1], reason = c[3] .. ' is stale',
                              expected_version = c[2], current_version = cur})
  end
end
if code then return {'CONFLICT', code, cjson.encode(conflicts)} end

local changed, versions = {}, {}
for _, w in ipairs(writes) do
  local nv = w.ver + 1
  if w.del then
    redis.call('HDEL', w.rkey, 'val')
    redis.call('HSET', w.rkey, 'ver', nv)
  else
    redis.call('HSET', w.rkey, 'val', w.val, 'ver', nv)
  end
  changed[w.key] = {w.ver, nv}
  versions[w.key] = nv
  redis.call('HSET', KEYS[2], w.key, nv)
end
redis.call('EXPIRE', KEYS[2], ARGV[6])
local id = redis.call('XADD', KEYS[3], '*', 'agent', agent, 'session', session, 'time', now,
                      'keys', cjson.encode(changed), 'reads', cjson.encode(reads),
                      'values', ARGV[8])
local outcome = cjson.encode({commit_id = id, versions = versions})
if ARGV[5] == '1' then redis.call('SET', KEYS[4], outcome, 'EX', ARGV[7]) end
return {'OK', outcome}
