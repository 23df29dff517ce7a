-- Add one sample to a tool's latency window (after record_sample.lua).
-- KEYS: latency window.  ARGV: sample member, now (ms), window (ms), max samples.
-- Returns 1.
record_sample(KEYS[1], ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]))
return 1
