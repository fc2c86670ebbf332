"""Federated-distillation baselines of the FedMosaic paper (Tables 2-4): PerAda, FedMKT and TAKFL.

They share knowledge between heterogeneous client models through logits on public data (the federation's
public-data hook, disjoint from every benchmark task), not only through parameters. The shared machinery (public
windows, answer-token logits, server-side models, distillation losses) is in :mod:`.base`, FedMKT's token alignment
in :mod:`.alignment`, one module per method; docs/methods/distillation-baselines.md gives the equations and every
adaptation to drake_bench's generative clients.
"""
