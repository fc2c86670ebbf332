"""CLI command groups. Each module defines ``register(app)`` and owns its commands.

``run``: run / list (evaluation); ``tune``: hyperparameter selection on the validation split; ``data``: build / publish / download; ``cards``: task cards;
``leaderboard``: canonical boards (build, render, validate, submit, html).
"""

MODULES = ["run", "tune", "data", "cards", "leaderboard"]
