"""FedRPCA (Robust-PCA aggregation of client LoRA updates) and its baselines FedProx, Task Arithmetic and TIES.

``rpca``: Principal Component Pursuit by the constant-penalty ADMM; ``rules``: the server rules on one LoRA
matrix's client updates; ``plugin``: the four method plugins (``fedrpca``, ``fedprox``, ``task-arithmetic``,
``ties``). The method page is docs/methods/fedrpca.md.
"""
