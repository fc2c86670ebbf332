"""drake_bench's version, in a module of its own so that recording it (result files) imports nothing else."""

from __future__ import annotations

__version__ = "0.1.0"
