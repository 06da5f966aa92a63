"""What every rocketq process shares.

Owns the data model (``Message``, ``MessageExt``, ``MessageQueue``, topic configs and the
system constants), the CommitLog record codec and message ids, config loading, the error
classes, and the ``rocketq`` CLI. May import nothing else of rocketq: every other package
imports ``cluster``, so the CLI imports server packages lazily inside its commands.
"""
