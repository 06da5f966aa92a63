"""The nameserver: broker registration, liveness, topic routes and KV config.

May import ``cluster`` only.
"""
