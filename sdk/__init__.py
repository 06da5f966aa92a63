"""The Python client: producers, consumers and admin, asyncio first with a blocking twin.

May import ``cluster`` only; never a server package.
"""
