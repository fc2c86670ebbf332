"""FedRPCA and the baselines its paper ranks it against, as drake_bench method plugins.

All four are FedIT (FedAvg of one LoRA adapter per architecture) with another server rule or another local
objective, so a board compares only what the papers change:

* ``fedrpca`` (:class:`FedRPCA`): Robust-PCA aggregation of the client updates (Jhunjhunwala et al., FedRPCA);
* ``fedprox`` (:class:`FedProx`): FedIT plus FedProx's proximal term in local training (Li et al., MLSys 2020);
* ``task-arithmetic`` (:class:`TaskArithmetic`): FedIT with the averaged update scaled by ``scale`` (2 by default);
* ``ties`` (:class:`Ties`): FedIT with the client updates merged by TIES-merging.

Every one of them takes FedProx's ``proximal_mu`` as a client option (0 by default but in ``fedprox``), so
``fedrpca --set proximal_mu=0.01`` is the paper's FedRPCA + FedProx (its Fig. 5).

Round (shared, :class:`DeltaAggregation`): the server keeps one global adapter per architecture in its State,
starting from the architecture's shared initial adapter (what every client of it starts from). A client starts
from the global adapter the server last sent it (its own initial adapter in round 1), trains locally, and uploads
its whole adapter, as in FedIT, so uplink and downlink bytes are FedIT's. The server forms each client's update as
upload minus the global adapter it started from, merges the updates of each LoRA matrix with the method's rule
(:mod:`.rules`), adds the result to the architecture's current global, and sends the new global adapter to every
client of the architecture that took part. Under partial participation a client that skipped rounds started from
the older global it was last sent, not the current one: the server keeps each such version while a client holds it
(:meth:`DeltaAggregation.aggregate`). Evaluation and fast
adaptation follow FedIT's rules (docs/design-notes.md#evaluated-model, #adaptation-init): a client is scored with
its adapter after local training; fast adaptation starts from the architecture's global adapter after the last
round, the method's own aggregate of the final local adapters.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Any, Literal

import torch
from pydantic import ConfigDict, Field, field_validator

from drake_bench.benchmarks.sample import MethodSample
from drake_bench.errors import DrakeBenchError
from drake_bench.plugins.protocol import ClientContext, Diagnostic, Message, MethodMeta, State

from ..fedit import FedIT
from ..lora_clients import LoraClients, LoraSettings, average
from .rules import fedrpca_updates, mean_update, stack_columns, task_arithmetic_update, ties_update

LORA_MATRIX = re.compile(r"(^|\.)lora_[AB](\.|$)")
"""Adapter tensors the server rules apply to (one LoRA A or B each); any other tensor is plainly averaged."""

HELD = "held@"
"""Server-state prefix of an earlier global adapter that some client still holds: ``held@<version>/<arch>/<key>``."""

MAX_STACK_ELEMENTS = 2**24
"""Same-shaped matrices are solved together in stacks of at most this many float64 entries (128 MiB each)."""


# ---------------------------------------------------------------------------------------------- client side
class ClientSettings(LoraSettings):
    """FedIT's LoRA settings plus FedProx's proximal term, shared by the four methods."""

    model_config = ConfigDict(extra="forbid")

    proximal_mu: float = Field(
        default=0.0,
        ge=0.0,
        description="FedProx's proximal weight mu: local training minimises loss + mu/2 ||w - w_global||^2 over the "
        "adapter weights w, with w_global the adapter the client started the round from. 0: plain "
        "FedAvg-style local training.",
    )


def _proximal_gradient(param: torch.Tensor, anchor: torch.Tensor, mu: float, grad: torch.Tensor) -> torch.Tensor:
    """The gradient of loss + mu/2 ||w - anchor||^2 from the loss's gradient (added where w is at that moment)."""
    return grad + mu * (param.detach() - anchor)


class ProximalLoraClients(LoraClients):
    """:class:`LoraClients` whose local training adds FedProx's proximal term ``mu/2 ||w - w_start||^2``.

    The term's gradient ``mu (w - w_start)`` is added to every trainable adapter weight's gradient by a tensor
    hook, registered when the round's optimiser is built (``w_start`` = the weights then, i.e. the adapter the
    client starts from) and removed when the round ends; with ``proximal_mu = 0`` nothing is registered and
    training is exactly FedIT's. The reported loss is the task loss alone.
    """

    def __init__(self, settings: ClientSettings):
        super().__init__(settings)
        self._hooks: list[Any] = []

    def param_groups(self, model: Any) -> list[dict[str, Any]]:
        groups = super().param_groups(model)
        mu = float(self.settings.proximal_mu)
        if mu > 0:
            for group in groups:
                for p in group["params"]:
                    self._hooks.append(p.register_hook(partial(_proximal_gradient, p, p.detach().clone(), mu)))
        return groups

    def train(
        self,
        ctx: ClientContext,
        batches: Iterable[Sequence[MethodSample]],
        adapter: str | None = None,
        after_step: Callable[[int, Sequence[MethodSample]], None] | None = None,
    ) -> float:
        try:
            return super().train(ctx, batches, adapter=adapter, after_step=after_step)
        finally:
            self._remove_hooks()

    def train_group(
        self, ctxs: Sequence[ClientContext], batches: Sequence[Iterable[Sequence[MethodSample]]]
    ) -> list[float]:
        """Client batching: every client's optimiser is built on its own slot while it alone is trainable, so each
        slot gets the hook of its own starting weights."""
        try:
            return super().train_group(ctxs, batches)
        finally:
            self._remove_hooks()

    def _remove_hooks(self) -> None:
        for h in self._hooks:
            h.remove()
        self._hooks.clear()


# ---------------------------------------------------------------------------------------------- the round
def short_key(key: str) -> str:
    """A peft state-dict key without the wrapper prefix and the '.weight' suffix (a diagnostics row's name)."""
    key = key.removeprefix("base_model.model.")
    return key.removesuffix(".weight")


class DeltaAggregation(FedIT):
    """FedIT with a server rule on the client updates (upload minus the global adapter it started from): FedIT's
    client round, another ``aggregate``.

    Subclasses set ``meta``, ``Config`` and :meth:`merge_matrices`. With heterogeneous client models the server
    merges only within each architecture, as FedIT does: adapters of different architectures have different
    shapes and are never stacked together. Clients count equally.
    """

    Config = ClientSettings

    def __init__(self, config: ClientSettings | None = None):
        self.config = config or self.Config()
        self.clients = ProximalLoraClients(self.config)
        self._rows: list[Diagnostic] = []

    # -- server rule: override -------------------------------------------------------------------------------
    def merge_matrices(self, arch: str, keys: list[str], stack: torch.Tensor) -> list[torch.Tensor]:
        """Updates (float64 vectors) of same-shaped LoRA matrices ``keys`` of ``arch`` from their stacked client
        updates ``stack`` (len(keys), entries, clients); may append rows to ``self._rows``. Default: FedAvg."""
        return [mean_update(m) for m in stack]

    # -- protocol --------------------------------------------------------------------------------------------
    def architectures(self) -> dict[str, list[int]]:
        groups: dict[str, list[int]] = {}
        for c in sorted(self.arch):
            groups.setdefault(self.arch[c], []).append(c)
        return groups

    def init_server(self) -> State:
        """The global adapter of every architecture before round 1: its clients' shared initial adapter (version 0
        of every architecture's global, which every client holds)."""
        tensors: dict[str, torch.Tensor] = {}
        for arch, members in self.architectures().items():
            tensors.update({f"{arch}/{k}": v.clone() for k, v in self.clients.initial(members[0]).items()})
        return State(
            tensors=tensors,
            metadata={
                "round": 0,
                "version": {a: 0 for a in self.architectures()},
                "holds": {str(c): 0 for c in sorted(self.arch)},
            },
        )

    def aggregate(
        self, round_idx: int, server_state: State, uploads: dict[int, Message]
    ) -> tuple[dict[int, Message], State]:
        """Per architecture: each upload's update against the global that client started from, merged by the rule
        and added to the architecture's current global.

        Under partial participation a client that skipped rounds started from an older global than the current one
        (the last one it was sent), so the server keeps, besides each architecture's current global, every earlier
        version some client still holds (``held@<version>/<arch>/<key>``), and records which version each client
        was sent (metadata ``holds``, client -> version; ``version``, architecture -> the current global's). A
        version is dropped as soon as no client holds it; with every client in every round none is kept. A server
        state without these records (a checkpoint written before them) reads as every client holding the current
        global, which is what the server then assumed."""
        self._rows = []
        meta = server_state.metadata or {}
        version = {a: int(v) for a, v in (meta.get("version") or {}).items()}
        holds = {str(c): int(v) for c, v in (meta.get("holds") or {}).items()}
        groups: dict[str, list[int]] = {}
        for c in sorted(uploads):
            groups.setdefault(self.arch[c], []).append(c)
        out: dict[int, Message] = {}
        server = dict(server_state.tensors)
        for arch, members in groups.items():
            current_v = version.get(arch, 0)
            current = {k[len(arch) + 1 :]: v for k, v in server_state.tensors.items() if k.startswith(f"{arch}/")}
            starts = [
                self._started_from(server_state.tensors, arch, current, current_v, holds.get(str(c), current_v), c)
                for c in members
            ]
            new = self.merge_architecture(arch, current, [uploads[c].tensors for c in members], starts)
            others = [c for c, a in self.arch.items() if a == arch and c not in members]
            if any(holds.get(str(c), current_v) == current_v for c in others):  # still held: keep it as it was
                server.update({f"{HELD}{current_v}/{arch}/{k}": v for k, v in current.items()})
            server.update({f"{arch}/{k}": v for k, v in new.items()})
            version[arch] = round_idx + 1
            for c in members:
                out[c] = Message(tensors=new)
                holds[str(c)] = round_idx + 1
        in_use = {(self.arch[int(c)], v) for c, v in holds.items() if int(c) in self.arch}
        for k in [k for k in server if k.startswith(HELD)]:
            v, arch, _ = k[len(HELD) :].split("/", 2)
            if (arch, int(v)) not in in_use or int(v) == version.get(arch, 0):
                del server[k]
        return out, State(tensors=server, metadata={"round": round_idx + 1, "version": version, "holds": holds})

    @staticmethod
    def _started_from(
        tensors: dict[str, torch.Tensor],
        arch: str,
        current: dict[str, torch.Tensor],
        current_v: int,
        held_v: int,
        client: int,
    ) -> dict[str, torch.Tensor]:
        """The global adapter ``client`` was last sent (version ``held_v`` of ``arch``'s global)."""
        if held_v == current_v:
            return current
        prefix = f"{HELD}{held_v}/{arch}/"
        start = {k[len(prefix) :]: v for k, v in tensors.items() if k.startswith(prefix)}
        if not start:
            raise DrakeBenchError(
                f"architecture {arch!r}: client {client} started from version {held_v} of the "
                f"global adapter, which the server's state does not hold (current version "
                f"{current_v}); its update cannot be formed"
            )
        return start

    def merge_architecture(
        self,
        arch: str,
        glob: dict[str, torch.Tensor],
        uploads: list[dict[str, torch.Tensor]],
        starts: list[dict[str, torch.Tensor]] | None = None,
    ) -> dict[str, torch.Tensor]:
        """The new global adapter of one architecture: ``glob`` (its current global) plus the rule's merge of the
        clients' updates, upload minus ``starts[i]``, the global client i started from (``glob`` for every client
        when not given)."""
        starts = starts if starts is not None else [glob] * len(uploads)
        keys = list(uploads[0])
        missing = sorted(set(keys) - set(glob))
        if missing or any(set(u) != set(keys) for u in uploads) or any(set(s) != set(glob) for s in starts):
            raise ValueError(
                f"architecture {arch!r}: uploads and the server's global adapter hold different "
                f"tensors (e.g. {missing[:3]})"
            )
        new: dict[str, torch.Tensor] = {}
        shapes: dict[tuple[int, ...], list[str]] = {}
        for k in keys:
            if LORA_MATRIX.search(k):
                shapes.setdefault(tuple(glob[k].shape), []).append(k)
            else:  # not a LoRA matrix (none in the zoo's adapters): the plain mean of the uploads
                new[k] = average([{k: u[k]} for u in uploads])[k]
        for shape, group in shapes.items():
            entries = max(1, glob[group[0]].numel() * len(uploads))
            chunk = max(1, MAX_STACK_ELEMENTS // entries)
            for i in range(0, len(group), chunk):
                part = group[i : i + chunk]
                stack = torch.stack(
                    [stack_columns([u[k].double() - g[k].double() for u, g in zip(uploads, starts)]) for k in part]
                )
                for k, update in zip(part, self.merge_matrices(arch, part, stack)):
                    new[k] = (glob[k].double() + update.view(shape)).to(glob[k].dtype)
        return {k: new[k] for k in keys}

    def adaptation_state(self, architecture: str, client_states: dict[int, State], server_state: State) -> State:
        """The architecture's global adapter after the last round: the method's own aggregate of the final local
        adapters (docs/design-notes.md#adaptation-init)."""
        prefix = f"{architecture}/"
        tensors = {k[len(prefix) :]: v for k, v in server_state.tensors.items() if k.startswith(prefix)}
        return (
            State(tensors=tensors) if tensors else super().adaptation_state(architecture, client_states, server_state)
        )


# ---------------------------------------------------------------------------------------------- the methods
UNSOLVED: dict[str, Any] = {
    "aggregated_by": "mean",
    "beta": None,
    "energy_ratio": None,
    "admm_iterations": 0,
    "admm_residual": None,
    "admm_converged": None,
    "sparse_fraction": None,
    "low_rank_rank": None,
}
"""The diagnostics row of a matrix that FedRPCA averaged instead (an architecture below ``min_clients``)."""


class FedProx(DeltaAggregation):
    """FedIT plus FedProx's proximal term ``mu/2 ||w - w_global||^2`` on the adapter weights in local training;
    the server averages the updates (FedAvg), per architecture."""

    meta = MethodMeta(
        name="fedprox",
        version="1.0",
        relative_compute=1.0,
        summary="FedIT with FedProx's proximal term in local training (a FedRPCA baseline).",
        reference="Li et al., Federated Optimization in Heterogeneous Networks (MLSys 2020)",
    )

    class Config(ClientSettings):
        model_config = ConfigDict(extra="forbid")
        proximal_mu: float = Field(
            default=0.01,
            ge=0.0,
            description="FedProx's proximal weight mu: local training minimises loss + mu/2 ||w - w_global||^2 over "
            "the adapter weights. 0.01 was the FedRPCA paper's best value on five of its six datasets "
            "(its Tables 6-7; grid 0.001, 0.01, 0.1, 1).",
        )


class TaskArithmetic(DeltaAggregation):
    """FedIT whose server adds ``scale`` times the averaged update (Task Arithmetic; a server learning rate)."""

    meta = MethodMeta(
        name="task-arithmetic",
        version="1.0",
        relative_compute=1.0,
        summary="FedIT with the averaged LoRA update scaled by a server factor (a FedRPCA baseline).",
        reference="Ilharco et al., Editing Models with Task Arithmetic (ICLR 2023); as a FedRPCA baseline (Eq. 5)",
    )

    class Config(ClientSettings):
        model_config = ConfigDict(extra="forbid")
        scale: float = Field(
            default=2.0,
            gt=0.0,
            description="The factor beta on the mean of the client updates of every LoRA matrix (1 is FedAvg). 2 was "
            "the FedRPCA paper's best on every dataset (grid 2, 3, 4).",
        )

    def merge_matrices(self, arch: str, keys: list[str], stack: torch.Tensor) -> list[torch.Tensor]:
        return [task_arithmetic_update(m, self.config.scale) for m in stack]


class Ties(DeltaAggregation):
    """FedIT whose server merges the client updates of every LoRA matrix by TIES-merging (trim, elect, disjoint
    mean; merge scale 1), separately for A and B and per layer, as FedRPCA splits them."""

    meta = MethodMeta(
        name="ties",
        version="1.0",
        relative_compute=1.0,
        summary="FedIT with the client LoRA updates merged by TIES-merging (a FedRPCA baseline).",
        reference="Yadav et al., TIES-Merging: Resolving Interference When Merging Models (NeurIPS 2023)",
    )

    class Config(ClientSettings):
        model_config = ConfigDict(extra="forbid")
        trim_fraction: float = Field(
            default=0.1,
            ge=0.0,
            lt=1.0,
            description="s: the fraction of each client's update entries (per LoRA matrix, smallest magnitudes) "
            "set to zero before the sign election. 0.1 was the FedRPCA paper's best on four of its six "
            "datasets, both text ones among them (grid 0.1, 0.3, 0.5, 0.7, 0.9).",
        )

    def merge_matrices(self, arch: str, keys: list[str], stack: torch.Tensor) -> list[torch.Tensor]:
        return [ties_update(m, self.config.trim_fraction) for m in stack]


class FedRPCA(DeltaAggregation):
    """FedRPCA: Robust-PCA aggregation of the clients' LoRA updates (Jhunjhunwala et al.).

    **Server**, every round and for every LoRA matrix separately (A and B of each adapted layer, never
    concatenated): the clients' updates (upload minus the global adapter they started from) are stacked as columns
    ``M`` (entries x clients); Principal Component Pursuit (:mod:`.rpca`, the constant-mu ADMM of Candès et al.,
    float64, ``rpca_lambda``, ``rpca_mu``, ``rpca_tol``, ``rpca_max_iter``) splits it into ``L + S``; the global
    matrix moves by ``mean(L) + beta * mean(S)``. With ``beta='adaptive'`` (the paper's choice for every reported
    result) ``beta = ||M 1|| / ||S 1||`` is recomputed per matrix and round; a number fixes it (1 is FedAvg up to
    the solver's residual). Details and guards: :func:`.rules.fedrpca_updates`.

    **Heterogeneous clients**: updates are stacked only among the clients of one architecture (as FedIT averages
    only within an architecture); different architectures are never stacked together. An architecture with fewer
    than ``min_clients`` clients (by default a client alone in its architecture) is averaged as FedIT does.

    **Client**: FedIT's local training; ``proximal_mu > 0`` adds FedProx's proximal term (FedRPCA + FedProx).

    **Diagnostics** (``ReportsDiagnostics``), per round and matrix: how it was aggregated (``aggregated_by``:
    'rpca', or 'mean' below ``min_clients``), beta, the energy ratio E = ||S 1|| / ||M 1||, the ADMM's iterations,
    residual and convergence, the sparse fraction of S, the rank of L and the number of clients. A matrix whose
    ADMM hit ``rpca_max_iter`` is reported with ``admm_converged: false`` and used as it stands.
    """

    meta = MethodMeta(
        name="fedrpca",
        version="1.0",
        relative_compute=1.0,
        summary="FedIT whose server splits each LoRA matrix's client updates by Robust PCA and amplifies the "
        "sparse, client-specific part.",
        reference="Jhunjhunwala et al., FedRPCA: Enhancing Federated LoRA Aggregation Using Robust PCA (2025)",
    )

    class Config(ClientSettings):
        model_config = ConfigDict(extra="forbid")
        beta: Literal["adaptive"] | float = Field(
            default="adaptive",
            description="Scale of the sparse part's mean. 'adaptive' (the paper): ||M 1|| / ||S 1|| per LoRA matrix "
            "and round, which gives the scaled sparse term the norm of the FedAvg update. A positive "
            "number fixes it for every matrix (the paper also tries 2, 3, 4); 1 is FedAvg.",
        )
        rpca_lambda: float | None = Field(
            default=None,
            gt=0.0,
            allow_inf_nan=False,
            description="Robust PCA's sparsity weight lambda in ||L||_* + lambda ||S||_1. None: 1/sqrt(max(d1, d2)) "
            "of each stacked matrix (d1 entries, d2 clients), the paper's and Candès et al.'s default.",
        )
        rpca_mu: float | None = Field(
            default=None,
            gt=0.0,
            allow_inf_nan=False,
            description="The ADMM's constant penalty mu (thresholds are 1/mu and lambda/mu). None: d1 d2 / (4 "
            "||M||_1) of each stacked matrix, the paper's default, which also makes the split "
            "independent of the updates' scale.",
        )
        rpca_tol: float = Field(
            default=1e-7,
            gt=0.0,
            description="The ADMM stops once ||M - L - S||_F <= rpca_tol ||M||_F (the paper's 1e-7).",
        )
        rpca_max_iter: int = Field(
            default=1000,
            ge=1,
            description="Iteration cap of the ADMM (the paper's 1000). A matrix that reaches it is used as it "
            "stands and reported with admm_converged false.",
        )
        min_clients: int = Field(
            default=2,
            ge=1,
            description="Architectures with fewer clients than this are averaged as FedAvg does (a lone client keeps "
            "its own update): a single column has no shared part to separate from a client-specific one, "
            "and adaptive beta would only rescale that client's update. 1: Robust PCA for every group.",
        )
        report_diagnostics: bool = Field(
            default=True,
            description="Report beta, E, the ADMM's iterations and residual, the sparse fraction and rank per round "
            "and LoRA matrix into the result file (raw.diagnostics). Off: nothing is reported.",
        )

        @field_validator("beta")
        @classmethod
        def _positive_beta(cls, v: Any) -> Any:
            if v != "adaptive" and not (v > 0 and math.isfinite(v)):  # inf would scale the sparse part without bound
                raise ValueError(f"beta must be 'adaptive' or a positive finite number, got {v!r}")
            return v

    def merge_matrices(self, arch: str, keys: list[str], stack: torch.Tensor) -> list[torch.Tensor]:
        cfg = self.config
        if stack.shape[2] < cfg.min_clients:
            if cfg.report_diagnostics:
                self._rows += [
                    Diagnostic(key=f"{arch}/{short_key(k)}", values={**UNSOLVED, "clients": stack.shape[2]})
                    for k in keys
                ]
            return [mean_update(m) for m in stack]
        solved = fedrpca_updates(
            stack, beta=cfg.beta, lam=cfg.rpca_lambda, mu=cfg.rpca_mu, tol=cfg.rpca_tol, max_iter=cfg.rpca_max_iter
        )
        if cfg.report_diagnostics:
            self._rows += [Diagnostic(key=f"{arch}/{short_key(k)}", values=diag) for k, (_, diag) in zip(keys, solved)]
        return [update for update, _ in solved]

    def round_diagnostics(self, round_idx: int) -> list[Diagnostic]:
        """The rows of the ``aggregate`` that has just run (one per architecture and LoRA matrix)."""
        return list(self._rows)
