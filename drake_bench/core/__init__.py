"""The foundation every layer uses: console output, progress, hostile-file JSON reading, write failures, the run
lock, portable numerics, source provenance and the strict pydantic base of every file format.

Nothing here imports another layer of drake_bench (only :mod:`drake_bench.errors`).
"""
