-- Settles a pending approval, once: the first of an approver's decision, its caller's
-- expiry and its caller leaving wins; the others change nothing. A decision that comes
-- after the approval expired settles it as expired instead.
--- KEYS: record_key, pending_key
--- ARGV: id, status, by, note, now_ms
-- status: approved | denied (a person's decision) or expired | withdrawn (its caller's).
-- Returns {1, status} when this call settled it, {0, status} when it was settled before,
-- {0, 'missing'} when there is no such approval (never asked, or kept no longer).
local held = redis.call('HMGET', record_key, 'status', 'expires')
if not held[1] then return {0, 'missing'} end
if held[1] ~= 'pending' then return {0, held[1]} end
local decided = status == 'approved' or status == 'denied'
if decided and tonumber(now_ms) >= tonumber(held[2]) then
  status, by, note = 'expired', '', ''
end
redis.call('HSET', record_key, 'status', status, 'by', by, 'note', note, 'at', now_ms)
redis.call('ZREM', pending_key, id)
return {1, status}
