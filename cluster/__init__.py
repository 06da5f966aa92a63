"""Operating a local cluster: the launcher of ``rocketq cluster up``, processes tracked by
pid, the sidecars (Prometheus, the console) and the main loop of a server process.

Sits above the servers and the SDK and below the benchmarks, the chaos harness and the
``rocketq`` CLI (``rocketq.cli``), which start clusters through it.
"""
