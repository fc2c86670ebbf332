"""Partitioners that assign items of merged tasks to clients (Flower-Datasets style: small, explicitly seeded)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# RNG salts (a fixed entry of each np.random.default_rng seed, so the two streams stay independent);
# frozen, since changing one changes every published split.
SALT_DIRICHLET_PROPORTIONS = 0xD2  # the Dir(alpha) draws of per-task client proportions (and their retries)
SALT_DIRICHLET_SHUFFLE = 0xD3  # per-task, per-split shuffle of rows before they are cut into client shares
_SPLIT_SALT = {"train": 0, "test": 1, "validation": 2}  # each split's shares are shuffled with a draw of their own


@dataclass(frozen=True)
class DirichletPartitioner:
    """Per-task client proportions drawn from Dir(alpha) (paper A.25, Table 35).

    Each task's items are shuffled and cut by proportions p_t ~ Dir(alpha * 1). The draw is
    retried (with the same generator advancing) until every client holds at least
    ``min_partition_size`` items in total, as Flower's DirichletPartitioner does.
    The same proportions split each task's test set, so a client's Self test matches its data.
    """

    num_partitions: int
    alpha: float
    seed: int = 0
    min_partition_size: int = 1
    max_tries: int = 100

    def proportions(self, train_sizes: list[int]) -> np.ndarray:
        """(tasks, clients) proportions; redrawn until every client's train share is large enough."""
        rng = np.random.default_rng([self.seed, SALT_DIRICHLET_PROPORTIONS])
        for _ in range(self.max_tries):
            p = rng.dirichlet(np.full(self.num_partitions, self.alpha), size=len(train_sizes))
            parts = self.cut(train_sizes, p, "train")
            if min(sum(len(x) for x in client) for client in parts) >= self.min_partition_size:
                return p
        raise ValueError(
            f"Dirichlet(alpha={self.alpha}) could not give every one of {self.num_partitions} clients "
            f"{self.min_partition_size} items in {self.max_tries} draws; lower min_partition_size"
        )

    def cut(self, sizes: list[int], p: np.ndarray, split: str) -> list[list[np.ndarray]]:
        """For each client, for each task: the row indices it receives under proportions ``p``."""
        parts: list[list[np.ndarray]] = [[] for _ in range(self.num_partitions)]
        for t, n in enumerate(sizes):
            perm = np.random.default_rng([self.seed, SALT_DIRICHLET_SHUFFLE, t, _SPLIT_SALT[split]]).permutation(n)
            bounds = np.round(np.cumsum(p[t]) * n).astype(int)
            bounds[-1] = n
            start = 0
            for c in range(self.num_partitions):
                parts[c].append(np.sort(perm[start : bounds[c]]))
                start = bounds[c]
        return parts
