"""Benchmarks behind ``rocketq bench``: the store alone, rocketq end to end, and peer brokers.

May import any rocketq package; nothing imports ``bench`` but the CLI.
"""
