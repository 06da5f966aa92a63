"""The Python client: producers, consumers and admin, asyncio first, with blocking twins in
``sdk/sync.py``. Users import them from ``rocketq`` and ``rocketq.sync``, which re-export
them; inside rocketq, code imports the module that defines a name.

May import ``rocketq.cluster``'s shared model only; never a server package.
"""
