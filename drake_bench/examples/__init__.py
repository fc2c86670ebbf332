"""Example method plugins that ship with the package: small, complete, tested, model-free.

:mod:`drake_bench.examples.majority` is the plugin ``docs/writing-a-method.md`` and the README
walk through; copy it as the starting point of your own method.
"""
