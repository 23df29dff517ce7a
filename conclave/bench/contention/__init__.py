"""`conclave bench contention`: agents on shared state, with the two Redis baselines."""
