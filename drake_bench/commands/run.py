"""(commands registered by register(app))"""

import typer


def register(app: typer.Typer) -> None:
    return None
