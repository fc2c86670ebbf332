"""HeteroTune (DeMA + CMGA) and its Homo-Training baseline as drake_bench methods.

``config``: the settings, every open choice a key; ``depths``: the model types and the relative-depth map;
``dema``: the adapter through peft's custom-module dispatch, and the inference merge; ``cmga``: the joint whitening
of the types' share-slot updates on the canonical depth grid; ``accounting``: the communication formula;
``plugin``: the ``heterotune`` and ``homo-training`` plugins. The method page is docs/methods/heterotune.md.
"""
