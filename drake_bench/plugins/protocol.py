"""The method plugin protocol: everything a PFL method implements to run under the standard evaluator.

A method is any class with the attributes and calls of :class:`Method` (a ``typing.Protocol``,
not a base class: any object of the right shape is a method, as in MTEB's model protocols). The
registry checks ``isinstance(obj, Method)`` when a method is created; the evaluator checks every
value a call returns (see :mod:`drake_bench.plugins.guard`) and names the method, seed, client, round and
call at fault when one is wrong.

Everything that crosses the boundary is explicit and serialisable:

* :class:`State`: a client's or the server's state, tensors (saved with safetensors) plus JSON
  metadata. The evaluator checkpoints every state after every round and hands them back on resume.
* :class:`Message`: what travels between server and client, tensors plus small JSON metadata.
  The evaluator measures its bytes (uplink and downlink) itself, so a method cannot under-report what it sends.
  (What the method's own worker process keeps between calls, a class attribute or a file, is outside the
  protocol and not metered: docs/writing-a-method.md, "What the evaluator measures".)

The order of calls, driven by the evaluator (methods never see the schedule or any test answer)::

    method = Config -> Method(config)                               # registry, from --set / method_config
    identity = method.model_identity(name)  [optional]              # per distinct model of the allocation
    method.setup(federation)                                        # once per seed: load models, align, ...
    client_state[c] = method.init_client(ctx(c, round 0))           # per client
    server_state = method.init_server()
    for each round r:
        upload[c], client_state[c] = method.client_update(ctx(c, r), client_state[c], message[c], batches)
            (or, with --client-batching, one client_update_group per architecture  [optional])
        rows = method.client_diagnostics(ctx(c, r))  [optional]          # numbers about that client's step
        message, server_state = method.aggregate(r, server_state, upload)      # one message per client
        rows = method.round_diagnostics(r)  [optional]                   # numbers about that aggregate
        every eval_every rounds: method.predict(ctx(c, r), client_state[c], queries)   # answers hidden
    client_state = method.post_federation(federation, client_state, server_state)   [optional]
    start = method.adaptation_state(architecture, client_states, server_state)       [optional]
        -> client_update / predict on each unseen task (fast adaptation)

``docs/writing-a-method.md`` walks through each call with a tested example.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Protocol, runtime_checkable

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, Field

from drake_bench.benchmarks.sample import MethodSample, Sample


@dataclass
class Message:
    """Tensors plus small JSON metadata exchanged between a client and the server.

    The evaluator counts :meth:`num_bytes` of every upload and download; what a method does not
    put in a message cannot travel, so communication cost is measured, never self-reported.
    """

    tensors: dict[str, torch.Tensor] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)

    def num_bytes(self) -> int:
        """Bytes on the wire: tensor payloads at their dtype plus the JSON metadata."""
        payload = sum(t.numel() * t.element_size() for t in self.tensors.values())
        return int(payload + len(json.dumps(self.metadata, sort_keys=True, default=str).encode()))

    def elements_by_dtype(self) -> dict[str, int]:
        """Tensor elements per dtype (``{"float32": 86016}``): bytes alone cannot compare two methods that send
        at different precisions (a bf16 upload is half the bytes of the same numbers in fp32), so the evaluator
        records both."""
        out: dict[str, int] = {}
        for t in self.tensors.values():
            name = str(t.dtype).removeprefix("torch.")
            out[name] = out.get(name, 0) + t.numel()
        return dict(sorted(out.items()))

    def validate(self) -> None:
        """Raise ValueError on a malformed message (wrong types, non-finite values, non-JSON metadata)."""
        if not isinstance(self.tensors, dict) or not isinstance(self.metadata, dict):
            raise ValueError("Message.tensors and Message.metadata must be dicts")
        for k, t in self.tensors.items():
            if not isinstance(k, str) or not isinstance(t, torch.Tensor):
                raise ValueError(f"tensor entry {k!r} is {type(t).__name__}, expected torch.Tensor under a str key")
            if (t.is_floating_point() or t.is_complex()) and not bool(torch.isfinite(t).all()):
                raise ValueError(f"tensor {k!r} contains NaN or Inf")
        try:
            where = _first_non_str_key(self.metadata, "metadata")
            if where is None:
                json.dumps(self.metadata, allow_nan=False)
        except RecursionError:
            raise ValueError("metadata is nested too deeply to cross as JSON") from None
        except TypeError as exc:
            raise ValueError(f"metadata is not JSON-serialisable: {exc}") from None
        except ValueError:
            raise ValueError("metadata contains NaN or Infinity (not valid JSON)") from None
        if where is not None:
            path, key = where
            raise ValueError(
                f"{path} has the key {key!r} ({type(key).__name__}): metadata crosses as JSON, which "
                f"turns every key into a string, so what comes back from a checkpoint or a worker "
                f"process would differ from what was returned (a run would not resume the same); use "
                f"str keys"
            )


def _first_non_str_key(value: Any, path: str) -> tuple[str, Any] | None:
    """``(where, key)`` of the first dict key in ``value`` that is not a str, else None."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return path, key
            found = _first_non_str_key(item, f"{path}[{key!r}]")
            if found is not None:
                return found
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            found = _first_non_str_key(item, f"{path}[{i}]")
            if found is not None:
                return found
    return None


class State(Message):
    """A client's or the server's persistent state (same shape as a message, never counted as traffic)."""

    def save(self, path: Path) -> None:
        """Write atomically as safetensors (metadata in the header), so a kill never leaves half a file."""
        from safetensors.torch import save_file

        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tensors = {k: v.detach().contiguous().cpu() for k, v in self.tensors.items()}
        tmp = path.with_suffix(".tmp")
        save_file(tensors, str(tmp), metadata={"json": json.dumps(self.metadata, sort_keys=True)})
        tmp.replace(path)

    @classmethod
    def load(cls, path: Path) -> "State":
        from safetensors import safe_open

        tensors = {}
        with safe_open(str(path), framework="pt") as f:
            meta = json.loads((f.metadata() or {}).get("json", "{}"))
            for k in f.keys():
                tensors[k] = f.get_tensor(k)
        return cls(tensors=tensors, metadata=meta)


@dataclass(frozen=True)
class ClientContext:
    """Who and when a client-side call is for.

    ``seed`` is already mixed from the run seed, the client and the round (see :func:`mixed_seed`),
    and the evaluator seeds python, numpy and torch with it before every call, so a method that
    draws random numbers is reproducible without doing anything.
    """

    client_id: int
    model_name: str
    architecture: str
    round_idx: int
    seed: int
    device: str = "cpu"


@dataclass(frozen=True)
class FederationContext:
    """What a method may know about the federation before it starts: its shape, never its data or tasks."""

    benchmark: str
    modality: str
    clients: list[int]
    allocation: dict[int, str]
    architectures: dict[int, str]
    rounds: int
    local_steps: int
    batch_size: int
    seed: int
    device: str
    public_data: Callable[[int], list[Sample]]  # n -> public items, disjoint from every benchmark task
    workdir: Path


class MethodMeta(BaseModel):
    """What a method is, typed (as MTEB's ``ModelMeta``): recorded in every result file it produces."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(
        pattern=r"^[a-z0-9][a-z0-9._-]*$",
        description="Registry name: lower case, digits, '-', '_' or '.'; the entry point's name.",
    )
    version: str = Field(
        min_length=1, description="Bump it whenever a change can move a score: boards key on name + version."
    )
    summary: str = Field(default="", description="One line for `drake-bench list` and the docs.")
    reference: str | None = Field(default=None, description="The paper (title, venue or arXiv id) the method follows.")
    relative_compute: float = Field(
        default=1.0,
        gt=0,
        description="The author's estimate of one local step's compute relative to plain LoRA fine-tuning of the "
        "same base (1.0), shown by `drake-bench describe`. Informational: `--compute-matched` uses the "
        "evaluator's own measurement (the compute probe, drake_bench/evaluation/compute.py), never this number.",
    )


class ModelIdentity(BaseModel):
    """What a method reports about one base model of the allocation, before ``setup``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    architecture: str = Field(
        description="Clients whose models share an architecture can exchange parameters directly; "
        "fast adaptation runs once per architecture."
    )
    weights: dict[str, Any] = Field(
        default_factory=dict,
        description="What fixes the weights (a source id, a revision, a recipe, a sha256). Recorded in the "
        "result file and the checkpoint fingerprint: a run never resumes onto other weights.",
    )


@runtime_checkable
class Method(Protocol):
    """A PFL method. The module docstring shows when each call happens; every call is checked.

    A method raising :class:`~drake_bench.errors.DrakeBenchError` (e.g. a LeakageError) is passed
    through; any other exception becomes a :class:`~drake_bench.errors.PluginError` naming the
    method, seed, client, round and call.
    """

    meta: ClassVar[MethodMeta]
    Config: ClassVar[type[BaseModel]]
    config: BaseModel

    def setup(self, federation: FederationContext) -> None:
        """Once per seed, before any client is initialised: load models, align, allocate buffers.

        Args:
            federation: the federation's shape (clients, allocation, architectures, schedule sizes,
                seed, device, a public-data sampler and a private work folder). No benchmark data.
        """

    def init_client(self, ctx: ClientContext) -> State:
        """A client's state before round 1 (``ctx.round_idx`` is 0).

        Returns:
            The client's :class:`State`; checkpointed, then passed back to this client's calls.
        """

    def init_server(self) -> State:
        """The server's state before round 1 (an empty ``State()`` when the server keeps nothing)."""

    def client_update(
        self, ctx: ClientContext, state: State, message: Message | None, batches: Iterable[Sequence[MethodSample]]
    ) -> tuple[Message, State]:
        """One round of local training on one client.

        Args:
            ctx: client, model, architecture, round (0-based) and the call's seed.
            state: this client's state after its previous call.
            message: what ``aggregate`` sent this client last round (None in round 1 and during fast
                adaptation).
            batches: this round's batches of training items (``len(batches)`` local steps); each item
                carries images, question, choices and its answer, never its task or its row.

        Returns:
            ``(upload, new_state)``: the upload is measured (uplink bytes) and passed to ``aggregate``;
            the state is checkpointed. The evaluator times the call (training seconds per client).
        """

    def aggregate(
        self, round_idx: int, server_state: State, uploads: dict[int, Message]
    ) -> tuple[dict[int, Message], State]:
        """The server's step after every client's ``client_update`` of round ``round_idx`` (0-based).

        Returns:
            ``(messages, new_server_state)``: exactly one :class:`Message` for every client id in
            ``uploads`` (measured as downlink bytes, delivered to that client's next ``client_update``).
        """

    def predict(self, ctx: ClientContext, state: State, queries: Sequence[MethodSample]) -> list[str]:
        """Answers for evaluation queries (answers blanked), one string per query in order.

        Called on the client's own tasks (Self), other clients' tasks (Others) and unseen tasks during
        fast adaptation. The evaluator scores the strings (exact choice, number or token F1).
        """


@runtime_checkable
class ReportsModels(Protocol):
    """Optional: a method that runs base models says which, so results record the exact weights.

    Without it, every allocation name is its own architecture and its identity is its name, and the
    evaluation settings record only that decoding is the method's own.
    """

    def model_identity(self, model_name: str) -> ModelIdentity:
        """The architecture and weight identity of one allocation model name (called before ``setup``)."""

    def evaluation_settings(self) -> dict[str, Any]:
        """Every knob of inference that moves scores (decoding, prompt template version, batch size, padding side).

        Returns a dict validated as :class:`drake_bench.results.result_file.EvaluationSettings`.
        """


class Diagnostic(BaseModel):
    """One row of numbers a method reports about its own server step (see :class:`ReportsDiagnostics`) or about
    one client's step (:class:`ReportsClientDiagnostics`).

    The evaluator stores each row in the result file's ``raw.diagnostics`` with the seed and the
    1-based round. Diagnostics are the method's own account, kept for inspection and plots; no
    headline number, cost or score is ever computed from them.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str = Field(
        min_length=1,
        max_length=300,
        description="What the row is about, e.g. one weight matrix: 'llava-llama-s/layers.0.self_attn.q_proj.lora_A'.",
    )
    values: dict[str, float | int | bool | str | None] = Field(
        description="Named JSON scalars (finite numbers; None for a value that is undefined this round)."
    )


@runtime_checkable
class ReportsDiagnostics(Protocol):
    """Optional: a method that reports numbers about its server step, kept in the result file.

    FedRPCA reports, per round and weight matrix, its scale beta, the solver's iterations and residual
    and the sparse part's share. Without this protocol a result's ``raw.diagnostics`` stays empty.
    """

    def round_diagnostics(self, round_idx: int) -> list[Diagnostic]:
        """Rows about the ``aggregate(round_idx, ...)`` call that has just returned.

        Called once per round, right after ``aggregate`` and in the same process, before any other call,
        so a method may keep the rows on ``self`` from ``aggregate`` until then. Not part of the timed
        aggregation. Rows may be :class:`Diagnostic` or dicts of the same shape; an empty list is fine.
        """


@runtime_checkable
class ReportsClientDiagnostics(Protocol):
    """Optional: a method that reports numbers about each client's step of a federated round (TAP: per task key,
    the histories and whether the personal copy took the FL copy's components).

    Numbers a client computes stay on that client's side: under Flower ``client_update`` runs on the client's node,
    not beside ``aggregate``, so rows kept on ``self`` in ``client_update`` never reach ``round_diagnostics``. This
    call is made where ``client_update`` ran and its rows travel back with the client's reply (outside the measured
    upload: they are the evaluator's record, not a message to the server), so both backends record the same rows.
    """

    def client_diagnostics(self, ctx: ClientContext) -> list[Diagnostic]:
        """Rows about the ``client_update(ctx, ...)`` call that has just returned.

        Called right after each federated round's ``client_update`` (not during fast adaptation), on the same
        handle and before any other call, so a method may keep the rows on ``self`` until then. The evaluator
        files each row under ``client/<client id>/<key>`` with the seed and the 1-based round, before the round's
        ``round_diagnostics`` rows. Not part of the timed client update.
        """


@runtime_checkable
class TrainsClientsTogether(Protocol):
    """Optional: one call runs the ``client_update`` of several clients of one architecture (``--client-batching``).

    Clients of one architecture share a frozen base and differ in small adapters, so their local steps can run as
    one pass (a grouped LoRA: each item through its own client's adapter). With ``client_batching`` on, the default
    backend groups each round's clients by architecture and makes this call once per group instead of one
    ``client_update`` per client; fast adaptation and the Flower backend (a node stands for one client) keep the
    per-client call. The evaluator seeds the call with the first client's seed, so a method whose local training
    draws random numbers should not implement it; its per-client seconds are the group's seconds shared equally.
    ``client_diagnostics(ctx)`` is asked for each client of the group after the call.
    """

    def client_update_group(
        self,
        ctxs: Sequence[ClientContext],
        states: Sequence[State],
        messages: Sequence[Message | None],
        batches: Sequence[Iterable[Sequence[MethodSample]]],
    ) -> list[tuple[Message, State]]:
        """``[client_update(ctxs[i], states[i], messages[i], batches[i]) for i ...]`` computed together: the same
        uploads and states within float tolerance, in the order of ``ctxs``."""


@runtime_checkable
class PostFederation(Protocol):
    """Optional: a stage after the last round whose states replace the final evaluation (TAP's distillation)."""

    def post_federation(
        self, federation: FederationContext, client_states: dict[int, State], server_state: State
    ) -> dict[int, State]:
        """Returns a new :class:`State` for every client."""


@runtime_checkable
class AdaptationInit(Protocol):
    """Optional: where fast adaptation on an unseen task starts for one architecture.

    Without it a method is not evaluated on unseen tasks. The evaluator also runs the same
    adaptation from ``init_client`` (a fresh start), so the gain of the federated start is measured.
    """

    def adaptation_state(self, architecture: str, client_states: dict[int, State], server_state: State) -> State:
        """The starting state for the clients of ``architecture`` (their final states are given)."""


PROTOCOL_CALLS = ("setup", "init_client", "init_server", "client_update", "aggregate", "predict")
"""The required calls, in the order the evaluator first makes them."""

OPTIONAL_CALLS = {
    "model_identity": ReportsModels,
    "evaluation_settings": ReportsModels,
    "post_federation": PostFederation,
    "adaptation_state": AdaptationInit,
    "round_diagnostics": ReportsDiagnostics,
    "client_diagnostics": ReportsClientDiagnostics,
    "client_update_group": TrainsClientsTogether,
}
"""Optional calls and the protocol each belongs to."""


def protocol_problems(obj: Any) -> list[str]:
    """What keeps ``obj`` (a class or an instance) from being a :class:`Method`, in words; empty when it is one."""
    problems = []
    meta = getattr(obj, "meta", None)
    if not isinstance(meta, MethodMeta):
        problems.append(f"`meta` must be a drake_bench.MethodMeta, got {type(meta).__name__}")
    config_cls = getattr(obj, "Config", None)
    if not (isinstance(config_cls, type) and issubclass(config_cls, BaseModel)):
        problems.append("`Config` must be a pydantic BaseModel class (its fields are what --set can change)")
    for call in PROTOCOL_CALLS:
        if not callable(getattr(obj, call, None)):
            problems.append(f"missing call `{call}`")
    partial = [
        p.__name__
        for p in (ReportsModels,)
        if any(hasattr(obj, c) for c, q in OPTIONAL_CALLS.items() if q is p)
        and not all(callable(getattr(obj, c, None)) for c, q in OPTIONAL_CALLS.items() if q is p)
    ]
    problems += [
        f"implements part of the optional {name} protocol: give both model_identity and evaluation_settings"
        for name in partial
    ]
    if not isinstance(obj, type) and not isinstance(getattr(obj, "config", None), BaseModel):
        problems.append("instance has no `config` (a Config instance); set self.config in __init__")
    return problems


def seed_everything(seed: int) -> None:
    """Seed python's, numpy's and torch's global generators (the evaluator does this before each call)."""
    import random

    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


def mixed_seed(*parts: int) -> int:
    """A 63-bit seed from several integers (run seed, client, round): same inputs, same seed."""
    return int(
        np.random.SeedSequence([abs(int(p)) for p in parts]).generate_state(2, dtype=np.uint32).view(np.uint64)[0] >> 1
    )
