"""``python -m rocketq``: the ``rocketq`` command line."""

from __future__ import annotations

from rocketq.cli.main import app

if __name__ == "__main__":
    app(prog_name="rocketq")
