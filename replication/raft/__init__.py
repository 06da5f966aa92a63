"""DLedger-style Raft: leader election and a replicated CommitLog with automatic failover."""
