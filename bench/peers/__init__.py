"""``rocketq bench peers``: rocketq side by side with Redis Streams, RabbitMQ and NATS
JetStream, all driven from Python on one machine in one run, so that every claim about
speed is a ratio measured side by side.

Modules: ``workload`` (what every system is asked to do), ``scenarios`` (the same four
runs over any system's client), ``systems/`` (one module per system: how its server is
started and configured per durability class, and its client), ``processes`` (servers
started by pid, stopped by pid), ``install`` (Debian packages and Python clients),
``results`` (table, ratios, JSON), ``chart`` (PNG), ``runner`` (one whole run).
"""
