"""Benchmark data: the typed spec, the published manifests, the definitions of real benchmarks, the embedded
(synthetic) mirrors, building from sources into the on-disk store, the Hub, and the dataset card.

The unit of data, :class:`~drake_bench.benchmarks.sample.Sample`, lives here because every benchmark is made of it.
"""
