"""Moved to :mod:`drake_bench.streams.stream`. This import path keeps working until drake_bench 0.2, with a DeprecationWarning:
third-party plugins written against 0.1 import it."""

import importlib
import sys
import warnings

warnings.warn(
    "drake_bench.stream moved to drake_bench.streams.stream; import from there (or from drake_bench itself): "
    "the old path goes in drake_bench 0.2",
    DeprecationWarning,
    stacklevel=2,
)
sys.modules[__name__] = importlib.import_module("drake_bench.streams.stream")
