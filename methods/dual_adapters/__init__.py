"""Dual-adapter personalisation baselines of the FedMosaic paper (Tables 2-4): DITTO, FedSim, FedDPA, FedDAT.

Each client holds a *global* LoRA adapter, averaged by the server among the clients of its architecture (Fed-ET
grouping, as the paper runs them), and a *local* one that never leaves the client; they differ in how the two are
trained and combined. The shared round (:mod:`.base`) and one module per method; docs/methods/dual-adapters.md
gives the equations and every adaptation to drake_bench's generative clients.
"""
