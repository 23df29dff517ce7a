-- Commit several writes at once: every check and every write in this one script, so a commit
-- is applied entirely or not at all, and nothing can change between the checks and the writes.
--- KEYS: cfg, read_log, history, idempotency, usage, ledger, sizes, data...
--- ARGV: agent, session, n_writes, n_reads, has_idempotency, read_log_ttl_s, idempotency_ttl_s, history_values, key_prefix, quota_keys, quota_bytes, history_len, read_log_max, history_ops, value_max, reserve_bytes, records...
-- KEYS: cfg, read log, history stream, idempotency key (or cfg again), the tenant's quota
--       usage, the tenant's expiring-record ledger (sorted set) and its sizes (hash),
--       write data keys..., explicit read-set data keys...
-- ARGV: agent, session, n writes, m reads, has idempotency key ('1'/'0'), read log ttl (s),
--       idempotency ttl (s), history values (JSON object), key prefix, quota keys,
--       quota bytes, history max length, read log max keys, history ops (JSON object),
--       value size cap (bytes), store reserve (bytes Redis keeps below maxmemory; 0: none),
--       then 6 per write: key, value JSON (an op's operand), delete ('1'/'0'), expected
--       version or '', fencing token or '', op or ''; then 2 per explicit read: key, version.
-- Returns {'OK'|'REPLAY', outcome JSON}, {'NSNF'}, {'CONFLICT', code, conflicts JSON,
-- (key, value, version) per stale key...}, {'QUOTA', keys used, bytes used, keys added,
-- bytes added} (bytes: values, history, read logs and idempotency records, `tenant_bytes`),
-- {'STORE_FULL', used memory, maxmemory, reserve} (Redis is down to the reserve only
-- admission, revocation and the audit of refusals may use), {'LOG_FULL', read log size}
-- (its written keys would overfill the read log), {'BAD_OP', key, op, stored JSON type} or
-- {'TOO_LARGE', key, size} (an op's result).
-- The history entry records what the history checker needs to replay the commit: versions,
-- reads, the values of plain writes and each op with its operand (not the op's result, which
-- the checker recomputes from the values before it), and its own size in bytes.
-- An op write's key is not put in the read log (the writer did not see the value it
-- changed; an entry it had is dropped), so ops by different agents never conflict.
-- `apply_op` (state_ops.lua) and the `tenant_bytes_*` functions (tenant_bytes.lua) are
-- prepended to this script.
-- Each check carries a trailing "check" comment with its name (on its line, or on the first and
-- last line of its block): tests/gateway/state/test_commit_mutations.py removes each in turn
-- and shows the history checker or a lease assertion catches the removal.
-- Logged reads are data keys named from the prefix: they share the namespace's hash tag, so
-- they live in the same cluster slot as the declared keys.
if redis.call('EXISTS', cfg) == 0 then return {'NSNF'} end
local n, m = tonumber(n_writes), tonumber(n_reads)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local log_until = now + tonumber(read_log_ttl_s) * 1000
tenant_bytes_sweep(usage, ledger, sizes, now, 16)
if has_idempotency == '1' then
  local prior = redis.call('GET', idempotency)
  if prior then
    -- a write, so a WAIT on this connection (durability "replicated") covers the first attempt
    redis.call('EXPIRE', idempotency, idempotency_ttl_s)
    tenant_bytes_charge(usage, ledger, sizes, idempotency, 0, now + tonumber(idempotency_ttl_s) * 1000)
    return {'REPLAY', prior}
  end
end
local ns = redis.call('HMGET', cfg, 'mode', 'validate_reads')
local owned, validate = ns[1] == 'owned', ns[2] ~= '0'
local log_fresh = redis.call('EXISTS', read_log) == 0

-- Refusals are collected for every key; the envelope's code is the one the caller must act
-- on first (a lost lease outranks a stale version).
local RANK = {STATE_CONFLICT = 1, LEASE_REQUIRED = 2, LEASE_HELD = 3, LEASE_EXPIRED = 4,
              FENCED = 5}
local conflicts, code, rank, stale = {}, nil, 0, {}
local function refuse(c, detail)
  conflicts[#conflicts + 1] = detail
  if RANK[c] > rank then code, rank = c, RANK[c] end
  if c == 'STATE_CONFLICT' then stale[#stale + 1] = detail.key end
end

local writes = {}
for i = 1, n do
  local a = (i - 1) * 6
  local w = {key = records[a + 1], val = records[a + 2], del = records[a + 3] == '1',
             expected = tonumber(records[a + 4]), token = tonumber(records[a + 5]),
             op = records[a + 6], rkey = data[i]}
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
        refuse('LEASE_REQUIRED', x)  -- check: lease held without its token
      elseif w.token ~= fence then
        x.reason = 'fencing token ' .. w.token .. ' is not the current ' .. fence
        refuse('FENCED', x)  -- check: fencing token of an older lease
      end
    elseif live then
      if w.token == nil then
        x.reason = 'leased by another agent'
        refuse('LEASE_HELD', x)  -- check: lease held by another agent
      else
        x.reason = 'fencing token ' .. w.token .. ' is stale: another agent holds the lease'
        refuse('FENCED', x)  -- check: fencing token while another agent holds the lease
      end
    elseif w.token ~= nil and w.token == fence and owner == agent then
      x.reason = 'your lease expired at ' .. lexp
      refuse('LEASE_EXPIRED', x)  -- check: expired lease
    elseif w.token ~= nil then
      x.reason = 'fencing token ' .. w.token .. ' is stale or its lease was released'
      refuse('FENCED', x)  -- check: fencing token of a released lease
    else
      x.reason = 'owned namespace: acquire a lease on the key first'
      refuse('LEASE_REQUIRED', x)  -- check: owned namespace without a lease
    end
  end
  if w.expected ~= nil and w.expected ~= w.ver then  -- check: expected_version
    refuse('STATE_CONFLICT', {key = w.key, reason = 'expected_version is not current',
                              expected_version = w.expected, current_version = w.ver})
  end  -- check: expected_version
  writes[i] = w
end

-- The reads this commit depends on: the caller's logged reads (when the namespace validates
-- reads) and the explicit read set (always).
-- A logged '~<version>' is a version an earlier 409 showed with its value (see the end): a
-- commit may rely on it only by declaring it in its read_set, so a blind resend of a refused
-- commit is refused again.
local reads, checks, shown = {}, {}, {}
if validate then
  local logged = redis.call('HGETALL', read_log)
  for i = 1, #logged, 2 do
    local k, raw = logged[i], logged[i + 1]
    if string.byte(raw, 1) == 126 then
      shown[#shown + 1] = {k, tonumber(string.sub(raw, 2))}
    else
      local v = tonumber(raw)
      reads[k] = v
      checks[#checks + 1] = {k, v, 'logged read'}  -- check: logged read
    end
  end
end
local rbase = n * 6
for j = 1, m do
  local k, v = records[rbase + (j - 1) * 2 + 1], tonumber(records[rbase + (j - 1) * 2 + 2])
  if reads[k] ~= v then checks[#checks + 1] = {k, v, 'read_set'} end  -- check: read_set
  reads[k] = v
end
local prefix = key_prefix
for _, c in ipairs(checks) do
  local cur = tonumber(redis.call('HGET', prefix .. 'k:' .. c[1], 'ver')) or 0
  if cur ~= c[2] then
    refuse('STATE_CONFLICT', {key = c[1], reason = c[3] .. ' is stale',
                              expected_version = c[2], current_version = cur})
  end
end
for _, s in ipairs(shown) do
  if reads[s[1]] == nil then  -- check: shown version
    local cur = tonumber(redis.call('HGET', prefix .. 'k:' .. s[1], 'ver')) or 0
    refuse('STATE_CONFLICT', {key = s[1], expected_version = s[2], current_version = cur,
                              reason = 'a 409 showed version ' .. s[2] .. ': declare it in '
                                .. 'read_set to retry from it, or read the key again'})
  end  -- check: shown version
end
if code then
  -- Each stale key's current value goes back with the refusal, and its version into the read
  -- log (as shown), in this same script: the caller retries from them with one request,
  -- declaring the versions in its read_set, instead of reading every key again.
  local values, seen, logged_bytes = {}, {}, 0
  for _, k in ipairs(stale) do
    if not seen[k] then
      seen[k] = true
      local d = redis.call('HMGET', prefix .. 'k:' .. k, 'val', 'ver')
      if redis.call('HSET', read_log, k, '~' .. (tonumber(d[2]) or 0)) == 1 then
        logged_bytes = logged_bytes + #k + READ_LOG_FIELD_BYTES
      end
      values[#values + 1] = k
      values[#values + 1] = d[1] or ''
      values[#values + 1] = tonumber(d[2]) or 0
    end
  end
  if #values > 0 then
    redis.call('EXPIRE', read_log, read_log_ttl_s)
    tenant_bytes_charge(usage, ledger, sizes, read_log, logged_bytes, log_until, log_fresh)
  end
  return {'CONFLICT', code, cjson.encode(conflicts), unpack(values)}
end

-- Each op is applied to the stored value here, before anything is written: one that does not
-- fit its value refuses the whole commit.
local results, results_bytes = {}, 0
for _, w in ipairs(writes) do
  if w.op ~= '' then
    local out, have = apply_op(w.op, redis.call('HGET', w.rkey, 'val') or nil, w.val)
    if out == nil then return {'BAD_OP', w.key, w.op, have} end
    if #out > tonumber(value_max) then return {'TOO_LARGE', w.key, #out} end
    w.val = out
    results[w.key] = out
    results_bytes = results_bytes + #w.key + #out
  end
end

-- The written keys go into the read log: a commit may not take it past its cap either.
local logged_size, new_in_log, log_add = redis.call('HLEN', read_log), 0, 0
for _, w in ipairs(writes) do
  if w.op == '' and redis.call('HEXISTS', read_log, w.key) == 0 then
    new_in_log = new_in_log + 1
    log_add = log_add + #w.key + READ_LOG_FIELD_BYTES
  end
end
if new_in_log > 0 and logged_size + new_in_log > tonumber(read_log_max) then
  return {'LOG_FULL', logged_size}
end

-- The tenant's quota: keys holding a value, and every byte it holds (values, history, read
-- logs, idempotency records), over all its namespaces. A commit that would go over is refused
-- whole; one that only shrinks the usage always passes.
local add_keys, add_bytes, add_meta = 0, 0, 0
for _, w in ipairs(writes) do
  if redis.call('EXISTS', w.rkey) == 0 then add_meta = add_meta + #w.rkey + DATA_KEY_BYTES end
  local old = redis.call('HSTRLEN', w.rkey, 'val')  -- 0: no value (a stored value is never '')
  if w.del then
    if old > 0 then add_keys, add_bytes = add_keys - 1, add_bytes - old end
  else
    if old == 0 then add_keys = add_keys + 1 end
    add_bytes = add_bytes + #w.val - old
  end
end

-- The history entry, built before anything is written so its bytes count in the check.
local changed, versions, expected = {}, {}, {}
for _, w in ipairs(writes) do
  -- The history keeps what the writer expected, so the checker checks it as a read.
  if w.expected ~= nil then expected[w.key] = w.expected end
  changed[w.key] = {w.ver, w.ver + 1}
  versions[w.key] = w.ver + 1
end
local entry = {'agent', agent, 'session', session, 'time', tostring(now),
               'keys', cjson.encode(changed), 'reads', cjson.encode(reads),
               'values', history_values, 'ops', history_ops, 'expected', cjson.encode(expected)}
local entry_bytes = 64  -- the entry id and the stream's per-entry overhead
for _, field in ipairs(entry) do entry_bytes = entry_bytes + #field end
entry_bytes = entry_bytes + 4 + #tostring(entry_bytes) + 2  -- its own 'size' field
-- The history keeps the last ARGV[12] commits: the entries this one pushes out give their
-- bytes back.
local history_max = tonumber(history_len)
local dropping, freed = redis.call('XLEN', history) + 1 - history_max, 0
if dropping > 0 then
  for _, old in ipairs(redis.call('XRANGE', history, '-', '+', 'COUNT', dropping)) do
    local f = old[2]
    local size = nil
    for i = 1, #f, 2 do
      if f[i] == 'size' then size = tonumber(f[i + 1]) end
    end
    if size == nil then  -- an entry written before entries recorded their size
      size = 64
      for i = 1, #f do size = size + #f[i] end
    end
    freed = freed + size
  end
end
local idem_add = 0
if has_idempotency == '1' then
  idem_add = 96 + results_bytes + tenant_bytes_entry(ledger, idempotency)
  for _, w in ipairs(writes) do idem_add = idem_add + #w.key + 12 end
end
if log_add > 0 then log_add = log_add + tenant_bytes_entry(ledger, read_log) end
local add_all = add_bytes + add_meta + entry_bytes - freed + idem_add + log_add
local used = redis.call('HMGET', usage, 'keys')
local used_keys, used_bytes = tonumber(used[1]) or 0, tenant_bytes_used(usage)
if (add_keys > 0 and used_keys + add_keys > tonumber(quota_keys))
    or (add_all > 0 and used_bytes + add_all > tonumber(quota_bytes)) then
  return {'QUOTA', used_keys, used_bytes, add_keys, add_all}
end
local full = tenant_bytes_store_full(add_all, tonumber(reserve_bytes))
if full then return full end

-- A shown version the commit declared was current at this commit point: an ordinary read now
-- (before the writes, which log their new versions).
for _, s in ipairs(shown) do
  if reads[s[1]] ~= nil then redis.call('HSET', read_log, s[1], reads[s[1]]) end
end
local log_delta = 0
for _, w in ipairs(writes) do
  local nv = w.ver + 1
  if w.del then
    redis.call('HDEL', w.rkey, 'val')
    redis.call('HSET', w.rkey, 'ver', nv)
  else
    redis.call('HSET', w.rkey, 'val', w.val, 'ver', nv)
  end
  if w.op == '' then
    if redis.call('HSET', read_log, w.key, nv) == 1 then
      log_delta = log_delta + #w.key + READ_LOG_FIELD_BYTES
    end
  elseif redis.call('HDEL', read_log, w.key) == 1 then
    log_delta = log_delta - #w.key - READ_LOG_FIELD_BYTES
  end
end
redis.call('EXPIRE', read_log, read_log_ttl_s)
if redis.call('EXISTS', read_log) == 1 then
  tenant_bytes_charge(usage, ledger, sizes, read_log, log_delta, log_until, log_fresh)
end
if add_keys ~= 0 then redis.call('HINCRBY', usage, 'keys', add_keys) end
if add_bytes ~= 0 then redis.call('HINCRBY', usage, 'bytes', add_bytes) end
if add_meta ~= 0 then redis.call('HINCRBY', usage, 'meta', add_meta) end
entry[#entry + 1] = 'size'
entry[#entry + 1] = tostring(entry_bytes)
local id = redis.call('XADD', history, '*', unpack(entry))
if dropping > 0 then redis.call('XTRIM', history, 'MAXLEN', history_max) end
redis.call('HINCRBY', usage, 'hist', entry_bytes - freed)
local outcome = cjson.encode({commit_id = id, versions = versions, values = results})
if has_idempotency == '1' then
  redis.call('SET', idempotency, outcome, 'EX', idempotency_ttl_s)
  tenant_bytes_charge(usage, ledger, sizes, idempotency, 48 + #outcome,
                      now + tonumber(idempotency_ttl_s) * 1000, true)
end
return {'OK', outcome}
