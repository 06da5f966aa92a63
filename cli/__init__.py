"""The ``rocketq`` command line: the top floor, over every other package."""
