"""CommitLog replication: ``ha`` (master to slave streaming) and ``raft`` (a DLedger-style log).

May import ``cluster`` and ``storage``.
"""
