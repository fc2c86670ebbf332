"""Moved to :mod:`drake_bench.benchmarks.sample`. This import path keeps working until drake_bench 0.2, with a DeprecationWarning:
third-party plugins written against 0.1 import it."""

from drake_bench.core.moved import alias_moved_module

alias_moved_module(__name__, "drake_bench.benchmarks.sample")
