"""Embedded, procedurally generated benchmarks: drake-synth, hflb-synth, fedllm-synth, and their public data.

Built through the same manifest -> loader -> builder -> store path as the real
benchmarks (loader name ``"synth"``), so everything past the source is shared.
"""

from __future__ import annotations

from drake_bench.benchmarks.synth.builder import SYNTH_BENCHMARKS, build_synth, ensure_built
from drake_bench.benchmarks.synth.public import corpus_texts, public_mix, public_text_mix

__all__ = ["SYNTH_BENCHMARKS", "build_synth", "corpus_texts", "ensure_built", "public_mix", "public_text_mix"]
