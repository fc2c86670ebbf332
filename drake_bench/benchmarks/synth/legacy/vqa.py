"""Superseded image-quality generators, kept only so archived drake-synth versions rebuild byte for byte.

drake-synth 1.3.0 and 1.4.0 draw the four image-quality tasks with independent colour noise per pixel
(noise cell side 1) as generator version 3. The bodies are the current ones in
:mod:`drake_bench.benchmarks.synth.vqa`, which take the cell side as a parameter; since the item seed includes the
generator version, these items are separate draws, not the current items with other noise. Frozen: result
files cite the data hashes they produce.
"""

from __future__ import annotations

from drake_bench.benchmarks.synth.vqa import register_quality

register_quality(3, 1, "")
