"""Example method plugins that ship with the package: small, complete, tested.

:mod:`drake_bench.plugins.examples.majority` (``majority-answer``, no model) is the plugin
``docs/writing-a-method.md`` and the README walk through; copy it as the starting point of your own
method. :mod:`drake_bench.plugins.examples.lora` (``lora-example``) is the same for a method that trains the
zoo's models: per-client LoRA adapters over shared frozen bases, averaged per architecture
(``docs/writing-a-method.md#a-lora-method``).
"""
