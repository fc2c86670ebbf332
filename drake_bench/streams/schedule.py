"""Iteration-based ingestion: which items enter a client's memory before each local iteration.

The paper's Algorithm 1 implies one new sample per training step, which cannot hold with
~10k samples per task and only 500 iterations per task. drake_bench's rule, chosen so that
every item is seen while the iteration budget stays the paper's: a client gets
``T = rounds x local_steps`` iterations; each segment's items (a task in Dynamic/async, the
whole mixed pool in Static/Dirichlet) are spread over the iterations of the segment's rounds;
before each iteration ceil(remaining / remaining_iters) new items enter an infinite episodic
memory, and the batch is then drawn uniformly from memory. Every item is ingested exactly once
by the end of its segment.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def ingestion_counts(n_items: int, n_iters: int) -> np.ndarray:
    """New items before each of ``n_iters`` iterations: ceil(remaining / remaining_iters)."""
    if n_iters <= 0:
        raise ValueError("a segment needs at least one iteration")
    counts = np.zeros(n_iters, dtype=np.int64)
    remaining = n_items
    for i in range(n_iters):
        take = -(-remaining // (n_iters - i))  # ceil division
        counts[i] = take
        remaining -= take
    assert remaining == 0
    return counts


@dataclass(frozen=True)
class Segment:
    """Items arriving over a contiguous range of rounds (0-based, end exclusive)."""

    first_round: int
    last_round: int  # exclusive
    items: np.ndarray  # (n, 2) int64 rows of (task_index, row_index), in arrival order


@dataclass(frozen=True)
class IngestionSchedule:
    """Arrival order of a client's items and how many are in memory before each iteration."""

    rounds: int
    local_steps: int
    arrivals: np.ndarray  # (N, 2) (task_index, row_index) in arrival order
    memory_size: np.ndarray  # (rounds * local_steps,) items in memory before the batch of iteration t

    @classmethod
    def from_segments(cls, segments: list[Segment], rounds: int, local_steps: int) -> "IngestionSchedule":
        total = rounds * local_steps
        counts = np.zeros(total, dtype=np.int64)
        arrivals = []
        for seg in sorted(segments, key=lambda s: s.first_round):
            if not (0 <= seg.first_round < seg.last_round <= rounds):
                raise ValueError(f"segment rounds [{seg.first_round}, {seg.last_round}) outside 0..{rounds}")
            lo, hi = seg.first_round * local_steps, seg.last_round * local_steps
            counts[lo:hi] += ingestion_counts(len(seg.items), hi - lo)
            arrivals.append(seg.items.reshape(-1, 2))
        arr = np.concatenate(arrivals) if arrivals else np.zeros((0, 2), dtype=np.int64)
        return cls(rounds=rounds, local_steps=local_steps, arrivals=arr, memory_size=np.cumsum(counts))

    def iteration(self, round_idx: int, step: int) -> int:
        return round_idx * self.local_steps + step

    def ingested_by_end_of(self, round_idx: int) -> int:
        """Items in memory after the last iteration of ``round_idx`` (0-based)."""
        return int(self.memory_size[(round_idx + 1) * self.local_steps - 1])

    def seen_tasks(self, round_idx: int) -> set[int]:
        """Task indices with at least one item ingested by the end of ``round_idx``."""
        n = self.ingested_by_end_of(round_idx)
        return set(np.unique(self.arrivals[:n, 0]).tolist())

    def batch_indices(self, round_idx: int, batch_size: int, rng: np.random.Generator) -> list[np.ndarray]:
        """Arrival positions of each batch of a round: uniform from memory, without replacement in a batch."""
        out = []
        for step in range(self.local_steps):
            m = int(self.memory_size[self.iteration(round_idx, step)])
            if m == 0:
                out.append(np.zeros(0, dtype=np.int64))
            else:
                out.append(rng.choice(m, size=min(batch_size, m), replace=False))
        return out


def split_rounds(rounds: int, n_tasks: int) -> list[int]:
    """Rounds per task for Dynamic: equal shares; when rounds do not divide evenly, earlier tasks take one extra each."""
    if n_tasks > rounds:
        raise ValueError(f"{n_tasks} tasks cannot each get a round out of {rounds}")
    base, extra = divmod(rounds, n_tasks)
    return [base + (1 if i < extra else 0) for i in range(n_tasks)]
