"""What the evaluator handed a method, by split: the record that the test split was never read by the method.

A board ranks only results whose method never saw a test answer. The method cannot report that about itself, so
the evaluator keeps this ledger as it hands items over: every training item it gives a method (``client_update`` in
the federation and in fast adaptation) is an item *with* its answer, every item it asks ``predict`` about is a
query *without* one. Items are compared by the uid the method sees (an HMAC of the item id under the run's secret),
so an item given with its answer that is also a test item shows up as an overlap, whatever split it was read from.

The ledger lives in the seed's checkpoint (``extra``), so a resumed run keeps counting from where it stopped, and
its :meth:`AccessLedger.record` goes into the result file under ``fl.extra.data_access`` (one entry per seed).
``drake-bench leaderboard validate`` refuses a result without it, or with any test item given with its answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

DATA_ACCESS_KEY = "data_access"
"""Key of the ledger in ``fl.extra`` of a result file (per seed) and in a seed's checkpoint ``extra``."""

RECORD_VERSION = 1


class AccessLedger:
    """Uids of the items given to a method with their answers and of those it was asked about (queries)."""

    def __init__(self, with_answers: Iterable[str] = (), queries: Iterable[str] = ()):
        self.with_answers: set[str] = set(with_answers)
        self.queries: set[str] = set(queries)
        self.with_answers_count = 0
        self.queries_count = 0

    @classmethod
    def from_state(cls, state: dict[str, Any] | None) -> "AccessLedger":
        """The ledger a checkpoint saved (an empty one for a fresh run)."""
        state = state or {}
        ledger = cls(state.get("with_answers", ()), state.get("queries", ()))
        ledger.with_answers_count = int(state.get("with_answers_count", 0))
        ledger.queries_count = int(state.get("queries_count", 0))
        return ledger

    def state(self) -> dict[str, Any]:
        """JSON-able form kept in the checkpoint (sorted, so a checkpoint is deterministic)."""
        return {
            "with_answers": sorted(self.with_answers),
            "queries": sorted(self.queries),
            "with_answers_count": self.with_answers_count,
            "queries_count": self.queries_count,
        }

    def gave_with_answers(self, batches: Sequence[Sequence[Any]]) -> None:
        """Training items (``MethodSample``, answer included) handed to ``client_update``."""
        for batch in batches:
            for item in batch:
                self.with_answers.add(item.uid)
                self.with_answers_count += 1

    def asked(self, queries: Sequence[Any]) -> None:
        """Items handed to ``predict`` (``MethodSample`` with the answer blanked)."""
        for q in queries:
            if q.answer:  # the evaluator never does this; if it ever did, the query carried its answer
                self.with_answers.add(q.uid)
            self.queries.add(q.uid)
            self.queries_count += 1

    def record(self) -> dict[str, Any]:
        """What the result file keeps: counts, and how many scored (test) items the method was given with answers."""
        overlap = self.with_answers & self.queries
        return {
            "version": RECORD_VERSION,
            "recorded_by": "evaluator",
            "items_given_with_answers": self.with_answers_count,
            "distinct_items_given_with_answers": len(self.with_answers),
            "queries_without_answers": self.queries_count,
            "distinct_items_queried": len(self.queries),
            "queried_items_given_with_answers": len(overlap),
        }
