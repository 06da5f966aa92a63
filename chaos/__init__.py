"""The fault-injection harness: kills, pauses and partitions nodes of a launched cluster and
checks that every acknowledged message was consumed.

May import ``cluster`` and ``sdk``.
"""
