"""The broker process: RocketMQ's remoting request handlers, send/pull/offset/admin
processors, long polling, retry and dead letters, delay levels, transactions, order locks
and filters.

May import ``cluster``, ``storage`` and ``replication``.
"""
