"""Registers the embedded benchmarks' generator loader (implementation: drake_bench.benchmarks.synth.loader)."""

from drake_bench.benchmarks.synth.loader import SYNTH_LOADER

from . import register_loader

register_loader(SYNTH_LOADER)
