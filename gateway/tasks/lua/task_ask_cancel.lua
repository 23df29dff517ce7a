-- Records that a task's owner cancelled it, on a record that still exists (a write to an
-- expired one would make a record that never expires).
-- KEYS[1] the task's hash   ARGV[1] why (a fixed text: its few bytes are not charged)
-- Returns 1 when recorded, 0 when the task has gone.
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'cancel', ARGV[1])
return 1
