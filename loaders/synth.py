"""Registers the embedded benchmarks' generator loader (implementation: drake_bench.synth.loader)."""
from ..synth.loader import SYNTH_LOADER
from . import register_loader

register_loader(SYNTH_LOADER)
