"""TAP (two-stage adaptive personalization) and the baselines its paper ranks, as drake_bench method plugins.

``keys``: task keys (input modality x output format) and the components on each key's path; ``config``: the
settings; ``experts``: the components as named peft LoRA adapters, local training and answering per key;
``history``: the history values and the margin replacement; ``aggregation``: the server's component-wise FedAvg;
``distill``: Stage 2's distillation term; ``memory``: the client's own items kept for Stage 2; ``plugin``: the
``tap``, ``tap-no-kd``, ``fedavg-post-train`` and ``tap-local`` plugins; ``plots``: the replacement curve from
result files. The method page is docs/methods/tap.md.
"""
