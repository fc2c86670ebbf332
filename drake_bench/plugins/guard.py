"""Every call the evaluator makes into a method plugin, guarded and checked in one place.

A plugin is third-party code: it may raise, hang on nothing we can see, or return something of
the wrong shape. :class:`GuardedMethod` wraps a :class:`~drake_bench.plugins.protocol.Method` so that
each call either returns a checked value (a :class:`State` where a state is due, a valid
:class:`Message` per client, one string per query) or raises one :class:`PluginError` that names
the method, seed, client, round and call, so the author knows where to look. Errors drake_bench
raises on purpose inside a plugin call (a :class:`LeakageError`, a data error) pass through as
they are: they already say what is wrong.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from drake_bench.benchmarks.sample import MethodSample
from drake_bench.errors import DrakeBenchError, PluginError
from drake_bench.plugins.protocol import (
    AdaptationInit,
    ClientContext,
    Diagnostic,
    FederationContext,
    Message,
    Method,
    MethodMeta,
    ModelIdentity,
    PostFederation,
    ReportsClientDiagnostics,
    ReportsDiagnostics,
    ReportsModels,
    State,
    TrainsClientsTogether,
    seed_everything,
)

T = TypeVar("T")


def plugin_error(
    method: str,
    call: str,
    problem: str,
    seed: int | None = None,
    client: int | None = None,
    round_idx: int | None = None,
) -> PluginError:
    """A PluginError saying which method, seed, client, round (1-based) and call failed, and how."""
    where = [f"seed {seed}"] if seed is not None else []
    if client is not None:
        where.append(f"client {client}")
    if round_idx is not None:
        where.append(f"round {round_idx + 1}")
    loc = f" ({', '.join(where)})" if where else ""
    return PluginError(f"method {method!r} failed in {call}{loc}: {problem}")


def peak_memory_bytes() -> int:
    """This process's peak memory: CUDA's peak allocation on a GPU, the peak resident set otherwise."""
    import resource
    import sys

    import torch

    if torch.cuda.is_available():
        return int(torch.cuda.max_memory_allocated())
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss if sys.platform == "darwin" else rss * 1024)


class GuardedMethod:
    """A method plus the seed it runs under; every protocol call goes through :meth:`call`."""

    def __init__(self, method: Method, seed: int | None = None):
        self.method = method
        self.seed = seed
        self._flops: dict[str, int] | None = None  # per call name, while the evaluator counts (compute probes)

    @property
    def name(self) -> str:
        return self.method.meta.name

    @property
    def meta(self) -> MethodMeta:
        return self.method.meta

    @property
    def config_dump(self) -> dict[str, Any]:
        """The method's full config as JSON (recorded in the result file and the checkpoint fingerprint)."""
        return self.method.config.model_dump(mode="json")

    def close(self) -> None:
        """Nothing to release in-process (a :class:`~drake_bench.backends.worker_process.MethodProcess` stops its worker)."""

    # -- the one guard ------------------------------------------------------------
    def error(self, call: str, problem: str, client: int | None = None, round_idx: int | None = None) -> PluginError:
        """A PluginError saying which method, seed, client, round and call failed, and how."""
        return plugin_error(self.name, call, problem, self.seed, client, round_idx)

    def peak_memory_bytes(self) -> int:
        """Peak memory where the method runs: this process."""
        return peak_memory_bytes()

    def count_flops(self, on: bool) -> None:
        """Start (from zero) or stop counting the floating-point operations of every call from here on.

        The count is the evaluator's, taken around the plugin's code with torch's dispatch-level
        ``FlopCounterMode`` (matrix products and attention, forward and backward), so a method cannot
        under-report it; it is how ``--compute-matched`` measures a method against SFT.
        """
        self._flops = {} if on else None

    def counted_flops(self) -> dict[str, int]:
        """FLOPs per call name since :meth:`count_flops` was switched on (empty when it is off)."""
        return dict(self._flops or {})

    def call(
        self,
        call: str,
        fn: Callable[..., T],
        *args: Any,
        client: int | None = None,
        round_idx: int | None = None,
        rng_seed: int | None = None,
    ) -> T:
        """Run ``fn(*args)`` (global generators seeded with ``rng_seed`` first, when given); any exception
        that is not drake_bench's own becomes a located PluginError."""
        if rng_seed is not None:
            seed_everything(rng_seed)
        try:
            if self._flops is None:
                return fn(*args)
            from torch.utils.flop_counter import FlopCounterMode

            counter = FlopCounterMode(display=False)
            try:
                with counter:
                    return fn(*args)
            finally:
                name = call.split("(")[0]
                self._flops[name] = self._flops.get(name, 0) + int(counter.get_total_flops())
        except DrakeBenchError:
            raise
        except Exception as exc:
            raise self.error(call, f"{type(exc).__name__}: {exc}", client, round_idx) from exc

    # -- checks of returned values ------------------------------------------------------
    def _message(self, value: Any, call: str, client: int | None, round_idx: int | None, part: str = "") -> Message:
        prefix = f"{part}: " if part else ""
        if not isinstance(value, Message):
            raise self.error(call, f"{prefix}returned {type(value).__name__}, expected a Message", client, round_idx)
        try:
            value.validate()
        except ValueError as exc:
            raise self.error(call, f"{prefix}{exc}", client, round_idx) from None
        return value

    def _state(self, value: Any, call: str, client: int | None, round_idx: int | None, part: str = "") -> State:
        """A validated State; a Message of the right shape is accepted and stored as a State."""
        msg = self._message(value, call, client, round_idx, part)
        return msg if isinstance(msg, State) else State(msg.tensors, msg.metadata)

    # -- the protocol, guarded -----------------------------------------------------------
    def model_identity(self, model_name: str) -> ModelIdentity:
        if not isinstance(self.method, ReportsModels):
            return ModelIdentity(architecture=model_name, weights={"source": model_name})
        value = self.call(f"model_identity({model_name!r})", self.method.model_identity, model_name)
        if not isinstance(value, ModelIdentity):
            raise self.error(
                f"model_identity({model_name!r})", f"returned {type(value).__name__}, expected a ModelIdentity"
            )
        return value

    def evaluation_settings(self) -> dict[str, Any]:
        if not isinstance(self.method, ReportsModels):
            return {
                "decoding": {"method_defined": True},
                "batch_size": 1,
                "prompt_template_version": "method-defined",
                "extra": {"reported_by_method": False},
            }
        value = self.call("evaluation_settings", self.method.evaluation_settings)
        if not isinstance(value, dict):
            raise self.error("evaluation_settings", f"returned {type(value).__name__}, expected a dict")
        return value

    def setup(self, federation: FederationContext, rng_seed: int | None = None) -> None:
        self.call("setup", self.method.setup, federation, rng_seed=rng_seed)

    def init_client(self, ctx: ClientContext, rng_seed: int | None = None) -> State:
        value = self.call("init_client", self.method.init_client, ctx, client=ctx.client_id, rng_seed=rng_seed)
        return self._state(value, "init_client", ctx.client_id, None)

    def init_server(self, rng_seed: int | None = None) -> State:
        return self._state(
            self.call("init_server", self.method.init_server, rng_seed=rng_seed), "init_server", None, None
        )

    def client_update(
        self,
        ctx: ClientContext,
        state: State,
        message: Message | None,
        batches: Iterable[Sequence[MethodSample]],
        call: str = "client_update",
        rng_seed: int | None = None,
    ) -> tuple[Message, State]:
        r = ctx.round_idx if call == "client_update" else None
        out = self.call(
            call,
            self.method.client_update,
            ctx,
            state,
            message,
            batches,
            client=ctx.client_id,
            round_idx=r,
            rng_seed=rng_seed,
        )
        if not (isinstance(out, tuple) and len(out) == 2):
            raise self.error(
                call, f"returned {type(out).__name__}, expected (upload Message, new State)", ctx.client_id, r
            )
        upload = self._message(out[0], call, ctx.client_id, r, "the upload")
        return upload, self._state(out[1], call, ctx.client_id, r, "the new state")

    @property
    def trains_clients_together(self) -> bool:
        return isinstance(self.method, TrainsClientsTogether)

    def client_update_group(
        self,
        ctxs: Sequence[ClientContext],
        states: Sequence[State],
        messages: Sequence[Message | None],
        batches: Sequence[Iterable[Sequence[MethodSample]]],
        rng_seed: int | None = None,
    ) -> list[tuple[Message, State]]:
        """One ``client_update_group`` over clients of one round: an (upload, state) per client, each checked as
        :meth:`client_update` checks its own and named by its client."""
        clients = [c.client_id for c in ctxs]
        r = ctxs[0].round_idx
        call = f"client_update_group(clients {clients})"
        out = self.call(
            call,
            self.method.client_update_group,
            list(ctxs),
            list(states),
            list(messages),  # type: ignore[attr-defined]
            list(batches),
            round_idx=r,
            rng_seed=rng_seed,
        )
        if not isinstance(out, (list, tuple)) or len(out) != len(ctxs):
            got = f"{len(out)} items" if isinstance(out, (list, tuple)) else type(out).__name__
            raise self.error(
                call, f"must return a list of {len(ctxs)} (upload Message, new State) pairs, got {got}", None, r
            )
        replies = []
        for c, pair in zip(clients, out):
            if not (isinstance(pair, tuple) and len(pair) == 2):
                raise self.error(
                    call, f"returned {type(pair).__name__} for client {c}, expected (upload Message, new State)", c, r
                )
            replies.append(
                (self._message(pair[0], call, c, r, "the upload"), self._state(pair[1], call, c, r, "the new state"))
            )
        return replies

    def aggregate(
        self, round_idx: int, server_state: State, uploads: dict[int, Message], rng_seed: int | None = None
    ) -> tuple[dict[int, Message], State]:
        out = self.call(
            "aggregate", self.method.aggregate, round_idx, server_state, uploads, round_idx=round_idx, rng_seed=rng_seed
        )
        if not (isinstance(out, tuple) and len(out) == 2 and isinstance(out[0], dict)):
            raise self.error("aggregate", "must return (dict client id -> Message, server State)", None, round_idx)
        messages, server = out
        missing = sorted(c for c in uploads if c not in messages)
        if missing:
            raise self.error("aggregate", f"no message for clients {missing}", None, round_idx)
        extra = [c for c in messages if c not in uploads]
        if extra:  # a message for a client that does not exist (a typo, a str id) would be silently dropped
            raise self.error(
                "aggregate",
                f"messages for clients that are not in this federation: {extra!r} "
                f"(client ids are the ints {sorted(uploads)})",
                None,
                round_idx,
            )
        checked = {
            c: self._message(messages[c], "aggregate", c, round_idx, f"the message to client {c}") for c in uploads
        }
        return checked, self._state(server, "aggregate", None, round_idx, "the server state")

    def predict(
        self, ctx: ClientContext, state: State, queries: Sequence[MethodSample], rng_seed: int | None = None
    ) -> list[str]:
        r = ctx.round_idx
        preds = self.call(
            "predict", self.method.predict, ctx, state, queries, client=ctx.client_id, round_idx=r, rng_seed=rng_seed
        )
        if not isinstance(preds, list) or len(preds) != len(queries) or not all(isinstance(p, str) for p in preds):
            got = f"{len(preds)} items" if isinstance(preds, list) else type(preds).__name__
            raise self.error("predict", f"must return a list of {len(queries)} strings, got {got}", ctx.client_id, r)
        return preds

    @property
    def has_post_federation(self) -> bool:
        return isinstance(self.method, PostFederation)

    def post_federation(
        self, federation: FederationContext, states: dict[int, State], server: State, rng_seed: int | None = None
    ) -> dict[int, State]:
        after = self.call(
            "post_federation",
            self.method.post_federation,
            federation,
            states,
            server,  # type: ignore[attr-defined]
            rng_seed=rng_seed,
        )
        if not isinstance(after, dict) or sorted(after) != sorted(states):
            got = sorted(after) if isinstance(after, dict) else type(after).__name__
            raise self.error(
                "post_federation", f"must return a dict with a State for every client {sorted(states)}, got {got}"
            )
        return {c: self._state(after[c], "post_federation", c, None) for c in sorted(states)}

    @property
    def has_adaptation(self) -> bool:
        return isinstance(self.method, AdaptationInit)

    def adaptation_state(
        self, architecture: str, states: dict[int, State], server: State, client: int, rng_seed: int | None = None
    ) -> State:
        call = "fast adaptation init (adaptation_state)"
        value = self.call(
            call,
            self.method.adaptation_state,
            architecture,
            states,
            server,  # type: ignore[attr-defined]
            client=client,
            rng_seed=rng_seed,
        )
        return self._state(value, call, client, None)

    @property
    def has_diagnostics(self) -> bool:
        return isinstance(self.method, ReportsDiagnostics)

    def round_diagnostics(self, round_idx: int) -> list[dict[str, Any]]:
        """The method's rows about ``aggregate(round_idx)``, each checked as a :class:`Diagnostic` with finite
        numbers, as JSON dicts (``{"key": ..., "values": {...}}``); ``[]`` for a method without the protocol."""
        if not self.has_diagnostics:
            return []
        call = "round_diagnostics"
        rows = self.call(call, self.method.round_diagnostics, round_idx, round_idx=round_idx)  # type: ignore[attr-defined]
        return self._diagnostic_rows(call, rows, None, round_idx)

    @property
    def has_client_diagnostics(self) -> bool:
        return isinstance(self.method, ReportsClientDiagnostics)

    def client_diagnostics(self, ctx: ClientContext) -> list[dict[str, Any]]:
        """The method's rows about the ``client_update(ctx, ...)`` that has just returned, checked as
        :meth:`round_diagnostics` checks its rows; ``[]`` for a method without the protocol."""
        if not self.has_client_diagnostics:
            return []
        call = "client_diagnostics"
        rows = self.call(
            call,
            self.method.client_diagnostics,
            ctx,
            client=ctx.client_id,  # type: ignore[attr-defined]
            round_idx=ctx.round_idx,
        )
        return self._diagnostic_rows(call, rows, ctx.client_id, ctx.round_idx)

    def _diagnostic_rows(self, call: str, rows: Any, client: int | None, round_idx: int) -> list[dict[str, Any]]:
        if not isinstance(rows, (list, tuple)):
            raise self.error(call, f"returned {type(rows).__name__}, expected a list of Diagnostic", client, round_idx)
        out = []
        for i, row in enumerate(rows):
            try:
                d = row if isinstance(row, Diagnostic) else Diagnostic.model_validate(row)
            except Exception as exc:  # pydantic's message names the field
                raise self.error(call, f"row {i} is not a Diagnostic: {exc}", client, round_idx) from None
            bad = [k for k, v in d.values.items() if isinstance(v, float) and not math.isfinite(v)]
            if bad:
                raise self.error(
                    call,
                    f"row {i} ({d.key!r}): values {bad} are NaN or infinite (report None for an undefined value)",
                    client,
                    round_idx,
                )
            out.append(d.model_dump(mode="json"))
        return out
