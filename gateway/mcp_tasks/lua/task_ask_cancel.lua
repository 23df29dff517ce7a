-- Records that a task's owner cancelled it, on a record that still exists (a write to an
-- expired one would make a record that never expires).
--- KEYS: task_key
--- ARGV: why
-- why: a fixed text (its few bytes are not charged).
-- Returns 1 when recorded, 0 when the task has gone.
if redis.call('EXISTS', task_key) == 0 then return 0 end
redis.call('HSET', task_key, 'cancel', why)
return 1
