"""Coverage-guided fuzzing of every decoder of outside bytes (``rocketq bench fuzz``).

``targets.py`` holds one harness per decoder and ``harness.py`` the rule that judges an
input (a return value or the decoder's own error is fine; any other exception, more than
a second of CPU or running out of memory is a finding). ``seeds.py`` writes the seed
corpus from the project's own encoders; ``runner.py`` runs each harness in a process of
its own under atheris (``worker.py``, the only module that imports atheris) and collects
the findings.
"""
