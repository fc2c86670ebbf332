"""Frozen generator implementations that only archived benchmark versions use.

A manifest task names the generator version it was built with, and the registry serves the newest
implementation not newer than that (:mod:`drake_bench.benchmarks.synth.registry`). When a generator is redesigned,
the old body moves here: archived versions (``splits/archive/``) keep rebuilding to the data hashes their
result files cite, while the family modules hold only what current manifests draw. Importing this package
registers everything in it; :func:`drake_bench.benchmarks.synth.registry.get_generator` does so on first use.

Never edit a body here: a changed byte changes an archived benchmark's data hash.
"""

from __future__ import annotations

from drake_bench.benchmarks.synth.legacy import reasoning, relation, vqa  # noqa: F401  (registration happens on import)
