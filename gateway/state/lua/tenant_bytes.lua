-- Every byte a tenant makes Redis hold counts in its usage hash (cc:{t:<tenant>}:usage):
--   keys, bytes  keys holding a value and those values' bytes
--   meta         bytes of its data hashes themselves (a key's version, lease and fencing
--                token stay after its value is deleted, so these are never given back)
--   hist         bytes of its namespaces' history entries (each entry records its own size)
--   held         bytes of records that expire (read logs, idempotency records), in a ledger:
--                a sorted set (record key -> expiry, ms) and a hash (record key -> bytes)
-- The quota is on keys and on bytes + meta + hist + held. Prepended to the scripts that write
-- a tenant's state (read, commit, acquire); they call these before and after their writes.

-- What one ledger member costs beyond its record: its name in the set and the hash, and their
-- per-entry overhead.
local LEDGER_ENTRY_BYTES = 64
-- What one read-log field costs beyond its key name: the version, the hash entry's overhead.
local READ_LOG_FIELD_BYTES = 24
-- What one data hash costs beyond its name: its version, owner, lease and fencing fields.
local DATA_KEY_BYTES = 96

-- The bytes of the usage that count against the byte quota.
local function tenant_bytes_used(usage)
  local u = redis.call('HMGET', usage, 'bytes', 'meta', 'hist', 'held')
  return (tonumber(u[1]) or 0) + (tonumber(u[2]) or 0) + (tonumber(u[3]) or 0)
    + (tonumber(u[4]) or 0)
end

-- Drops up to `max` ledger members whose record has expired, and their bytes from the usage.
local function tenant_bytes_sweep(usage, ledger, sizes, now, max)
  local gone = redis.call('ZRANGEBYSCORE', ledger, '-inf', now, 'LIMIT', 0, max)
  if #gone == 0 then return end
  local freed = 0
  for _, name in ipairs(gone) do
    freed = freed + (tonumber(redis.call('HGET', sizes, name)) or 0)
  end
  redis.call('HDEL', sizes, unpack(gone))
  redis.call('ZREM', ledger, unpack(gone))
  redis.call('HINCRBY', usage, 'held', -freed)
end

-- What a record `name` costs in the ledger when it is first charged (0 if already there).
local function tenant_bytes_entry(ledger, name)
  if redis.call('ZSCORE', ledger, name) then return 0 end
  return 2 * #name + LEDGER_ENTRY_BYTES
end

-- Charges `delta` bytes (may be negative) to the expiring record `name`, which now expires at
-- `expires_at` (ms). `fresh`: the record did not exist before this write, so a charge left
-- from an earlier life of the same name (expired, not yet swept) is released first.
local function tenant_bytes_charge(usage, ledger, sizes, name, delta, expires_at, fresh)
  local entry = tenant_bytes_entry(ledger, name)
  if fresh and entry == 0 then
    delta = delta - (tonumber(redis.call('HGET', sizes, name)) or 0) + 2 * #name
      + LEDGER_ENTRY_BYTES
  end
  delta = delta + entry
  redis.call('ZADD', ledger, expires_at, name)
  if delta ~= 0 then
    redis.call('HINCRBY', sizes, name, delta)
    redis.call('HINCRBY', usage, 'held', delta)
  end
end

-- The refusal a write of `add` more bytes gets when Redis is within `reserve` bytes of its
-- maxmemory (the room kept for admission, revocation and the audit of refusals), else nil.
-- A Redis without maxmemory (0) has no reserve to keep; the reserve is at most a quarter of
-- maxmemory, so a small Redis still takes state.
local function tenant_bytes_store_full(add, reserve)
  if reserve <= 0 or add <= 0 then return nil end
  local info = redis.call('INFO', 'memory')
  local used = tonumber(string.match(info, '\nused_memory:(%d+)')) or 0
  local max = tonumber(string.match(info, '\nmaxmemory:(%d+)')) or 0
  reserve = math.min(reserve, math.floor(max / 4))
  if max > 0 and used + add > max - reserve then
    return {'STORE_FULL', used, max, reserve}
  end
  return nil
end
