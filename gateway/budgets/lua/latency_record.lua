-- Add one sample to a tool's latency window (after record_sample.lua).
--- KEYS: window, version
--- ARGV: member, now_ms, window_ms, max_samples
-- window: the latency window; version: its version; member: the sample.
-- Returns 1.
record_sample(window, version, member, tonumber(now_ms), tonumber(window_ms), tonumber(max_samples))
return 1
