"""What the three distillation baselines share: public windows, answer-token logits, server-side models, KD losses.

**Public data.** ``setup`` draws ``public_size`` items once from the federation's public-data hook
(``FederationContext.public_data``: the embedded public mix or the real one, disjoint from every benchmark task) and
round ``r`` works on a window of ``public_per_round`` of them, the window moving by its length every round (wrapping
around), so clients and server agree on the items from the round index alone and nothing about them travels.
Logits are computed for these public items only; a server call never sees benchmark data.

**Logits.** A generative client's counterpart of a classifier's logits is its next-token distribution at every
answer token of an item (the target text and eos: the positions drake_bench.models.loss_on scores), item after item.
An upload of the round's window therefore holds ``P x V`` numbers, P = the answer tokens of the window's items, V the
vocabulary (FedMKT keeps the top k of each row). They are computed in eval mode without gradients.

**Server-side models.** The protocol's server has no model, so :meth:`DistillationMethod.setup` gives it one per
architecture: a pseudo-client of the method's :class:`~drake_bench.models.ModelPool` with a negative id, holding the
server's own LoRA adapter(s) on the architecture's frozen base. The base is the clients' (one per architecture in
the pool), so a server model costs one adapter of memory here; a deployment whose server is a separate machine holds
one frozen base per architecture it distils (FedMKT: only its server model's). The server adapters live in the
server :class:`~drake_bench.plugins.protocol.State`, so a resumed run restores them.

**Sources.** Each method follows its authors' public code (cited by file in its docstring), read against the paper's
abstract and the FedMosaic paper's description; the papers' full texts were not at hand, so equations are written as
the codes compute them. Choices are marked [R] (a public source says so) or [I] (inferred, with the reason).

**Grouping.** Parameters are only ever averaged among the clients of one architecture (:func:`mean_by_architecture`),
as the LoRA baselines' Fed-ET grouping does; what crosses architectures is logits.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from pydantic import ConfigDict, Field

from drake_bench.benchmarks.sample import MethodSample
from drake_bench.errors import DrakeBenchError
from drake_bench.plugins.protocol import Diagnostic, FederationContext, Message, State

from ..dual_adapters.base import PAPER_LLM, PAPER_MLLM
from ..lora_clients import LoraClients, LoraMethod, LoraSettings, average

LOGITS = "logits"
"""The key of the public-data logits in an upload (every other key of a parameter-exchange upload is its adapter)."""

#: The FedMosaic paper's public data (its App. A.17: 5,000 public instruction items); each round takes a
#: twentieth of it (the paper's R = 20), so the paper's schedule passes over the set once [I].
PAPER_PUBLIC: dict[str, Any] = dict(public_size=5000, public_per_round=250)


class DistillSettings(LoraSettings):
    """The LoRA baselines' settings plus the public data. The defaults are the toy profile of the tiny zoo; the
    ``paper_*`` profiles give the FedMosaic paper's LoRA settings and public set with each method's own paper values
    (``PAPER_OWN``)."""

    model_config = ConfigDict(extra="forbid")

    #: the method's own hyperparameters in the paper profiles (their original code's values where the toy differs)
    PAPER_OWN: ClassVar[dict[str, Any]] = {}

    public_size: int = Field(
        default=64,
        ge=1,
        description="Public items drawn once from the federation's public-data hook (disjoint from every benchmark "
        "task). Toy 64; the FedMosaic paper's public set has 5,000.",
    )
    public_per_round: int = Field(
        default=8,
        ge=1,
        description="Public items whose logits each round computes and exchanges: a window of the public set that "
        "moves by its length every round. Traffic grows with it.",
    )
    distill_batch: int = Field(default=4, ge=1, description="Public items per distillation step.")
    report_diagnostics: bool = Field(
        default=True,
        description="Report the server's distillation loss on the round's window before and after each distillation "
        "(two extra forward passes over the window per distillation) and its choices in the result file "
        "(raw.diagnostics). Off: only the choices.",
    )

    @classmethod
    def toy(cls, **overrides: Any) -> "DistillSettings":
        """The toy CPU profile: the defaults."""
        return cls(**overrides)

    @classmethod
    def paper_mllm(cls, **overrides: Any) -> "DistillSettings":
        """The FedMosaic paper's multi-modal LoRA setting (rank 128, lr 2e-5), its 5,000 public items and the
        method's original hyperparameters."""
        return cls(**{**PAPER_MLLM, **PAPER_PUBLIC, **cls.PAPER_OWN, **overrides})

    @classmethod
    def paper_llm(cls, **overrides: Any) -> "DistillSettings":
        """The FedMosaic paper's text-LLM LoRA setting (rank 16, lr 3e-4), its public set and the method's own values."""
        return cls(**{**PAPER_LLM, **PAPER_PUBLIC, **cls.PAPER_OWN, **overrides})


# ---------------------------------------------------------------------------------------------- public logits
def window(pool: Sequence[MethodSample], per_round: int, round_idx: int) -> list[MethodSample]:
    """Round ``round_idx``'s public items: ``per_round`` consecutive items of ``pool``, starting where the previous
    round's window ended (wrapping around)."""
    n = len(pool)
    k = min(per_round, n)
    start = (round_idx * k) % n
    return [pool[(start + i) % n] for i in range(k)]


@dataclasses.dataclass
class Rows:
    """Per-position rows of a list of items, item after item: item ``i`` owns ``counts[i]`` consecutive rows."""

    values: torch.Tensor
    counts: list[int]

    def __post_init__(self) -> None:
        if sum(self.counts) != self.values.shape[0]:
            raise ValueError(f"{self.values.shape[0]} rows for {sum(self.counts)} answer positions")
        self.starts = [0]
        for n in self.counts:
            self.starts.append(self.starts[-1] + n)

    def item(self, i: int) -> torch.Tensor:
        return self.values[self.starts[i] : self.starts[i + 1]]

    def of(self, items: Sequence[int]) -> torch.Tensor:
        """The rows of ``items`` (indices into the item list), concatenated in that order."""
        return torch.cat([self.item(i) for i in items])


def answer_logits(
    model: Any, processor: Any, items: Sequence[MethodSample], packed: bool = True
) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """The logits predicting every answer token of ``items`` (positions x vocabulary, float32, item after item), those
    tokens, and how many each item has: the positions drake_bench.models.loss_on scores (with gradients when enabled).
    ``packed``: the settings' ``packed_training`` (drake_bench.models.engine.answer_logits)."""
    from drake_bench.models.engine import answer_logits as engine_answer_logits
    from drake_bench.models.engine import packing

    return engine_answer_logits(model, processor, list(items), packed=packing(packed))


EXTRACT_BATCH = 16
"""Public items per forward pass when extracting logits (the evaluator's generation batch)."""


def public_logits(
    model: Any, processor: Any, items: Sequence[MethodSample], packed: bool = True
) -> tuple[Rows, torch.Tensor]:
    """The model's answer-token logits on public ``items`` (eval mode, no gradients) and the answer tokens."""
    values, targets, counts = [], [], []
    with eval_mode(model), torch.no_grad():
        for i in range(0, len(items), EXTRACT_BATCH):
            v, t, c = answer_logits(model, processor, items[i : i + EXTRACT_BATCH], packed)
            values.append(v)
            targets.append(t)
            counts += c
    return Rows(torch.cat(values), counts), torch.cat(targets)


@contextlib.contextmanager
def eval_mode(model: Any) -> Iterator[None]:
    """The model in eval mode inside the block, its mode restored after (switching only when it is training: a
    switch walks every module)."""
    was = model.training
    if was:
        model.eval()
    try:
        yield
    finally:
        if was:
            model.train()


def answer_counts(processor: Any, items: Sequence[MethodSample]) -> list[int]:
    """How many answer tokens (target text and eos) each item has under ``processor``'s tokenizer: the rows its logits
    take, known without running the model."""
    from drake_bench.models.engine import tokenizer_of
    from drake_bench.models.prompting import target

    from .alignment import target_ids

    tok = tokenizer_of(processor)
    return [len(target_ids(tok, target(s))) for s in items]


def item_cross_entropy(logits: Rows, targets: torch.Tensor) -> torch.Tensor:
    """Each item's mean cross-entropy over its answer tokens (FedMKT's per-sequence metric)."""
    nll = F.cross_entropy(logits.values, targets, reduction="none")
    return torch.stack([nll[logits.starts[i] : logits.starts[i + 1]].mean() for i in range(len(logits.counts))])


# ---------------------------------------------------------------------------------------------- losses
def kl_rows(student: torch.Tensor, teacher: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """KL(softmax(teacher / T) || softmax(student / T)), summed over the vocabulary and averaged over rows (answer
    positions): PyTorch's ``kl_div(..., reduction="batchmean")`` as the original codes call it, without a T^2 factor
    (methods that scale by T^2 do so themselves). Exactly 0 when the rows agree."""
    t = float(temperature)
    return F.kl_div(
        F.log_softmax(student / t, -1), F.log_softmax(teacher / t, -1), reduction="batchmean", log_target=True
    )


def sparse_probabilities(
    logits: torch.Tensor, indices: torch.Tensor, vocab: int, temperature: float = 1.0
) -> torch.Tensor:
    """Top-k rows (logits and vocabulary ids) as full distributions: the softmax over the k entries at temperature T
    placed at their ids, zero elsewhere (FedMKT's data collator). Padding entries (logit ~ -1e4) weigh 0."""
    probs = torch.softmax(logits.float() / float(temperature), -1)
    return torch.zeros(logits.shape[0], vocab, dtype=probs.dtype).scatter_add_(-1, indices.long(), probs)


def soft_cross_entropy(student: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """-sum_v p_v log softmax(student)_v averaged over rows: FedMKT's ``distill_loss_type="ce"``."""
    return -(target * F.log_softmax(student, -1)).sum(-1).mean()


# ---------------------------------------------------------------------------------------------- parameters
def mean_by_architecture(
    adapters: Mapping[int, Mapping[str, torch.Tensor]], architectures: Mapping[int, str]
) -> dict[str, dict[str, torch.Tensor]]:
    """The equal-weight mean of the adapters of each architecture; adapters of different architectures are never
    averaged together (they differ in shape and in meaning)."""
    groups: dict[str, list[int]] = {}
    for c in sorted(adapters):
        groups.setdefault(architectures[c], []).append(c)
    return {arch: average([dict(adapters[c]) for c in members]) for arch, members in groups.items()}


def adapter_of(upload: Message) -> dict[str, torch.Tensor]:
    """The adapter tensors of a parameter-exchange upload (everything but its logits)."""
    return {k: v for k, v in upload.tensors.items() if k != LOGITS}


def prefixed(prefix: str, tensors: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {f"{prefix}/{k}": v for k, v in tensors.items()}


def unprefixed(prefix: str, tensors: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    p = f"{prefix}/"
    return {k[len(p) :]: v for k, v in tensors.items() if k.startswith(p)}


def base_parameters(model: Any) -> int:
    """Parameters of a peft model's frozen base (its LoRA matrices left out): how large an architecture is."""
    return sum(p.numel() for n, p in model.named_parameters() if "lora_" not in n)


def optimizer_step(loss: torch.Tensor, optimizer: torch.optim.Optimizer) -> None:
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def steps_for(epochs: int, items: int, batch: int) -> int:
    """Optimizer steps of ``epochs`` passes over ``items`` public items in mini-batches of ``batch``."""
    return int(epochs) * math.ceil(items / max(1, min(batch, items)))


def minibatch(step: int, n: int, batch: int) -> list[int]:
    """The item indices of distillation step ``step``: consecutive items of the window, wrapping around."""
    b = min(batch, n)
    return [(step * b + i) % n for i in range(b)]


# ---------------------------------------------------------------------------------------------- the method
class DistillationMethod(LoraMethod):
    """What the three distillation baselines share (module docstring): set-up, public windows, server models,
    the distillation loop and diagnostics. Subclasses set ``meta``, ``Config`` and ``adapters`` and implement the
    round (``init_client``, ``client_update``, ``aggregate``, ``predict``)."""

    Config = DistillSettings
    adapters: ClassVar[tuple[str, ...]] = ("default",)
    #: the method compares logits of different architectures position by position (PerAda, TAKFL): every
    #: architecture must tokenise the public answers identically; FedMKT aligns tokens instead.
    shared_vocabulary: ClassVar[bool] = True

    def __init__(self, config: DistillSettings | None = None):
        self.config = config or self.Config()
        self.clients = LoraClients(self.config, adapter_names=self.adapters)
        self._rows: list[Diagnostic] = []

    # -- set-up ------------------------------------------------------------------------------------------------
    def setup(self, federation: FederationContext) -> None:
        self.arch = dict(federation.architectures)
        self.members: dict[str, list[int]] = {}
        for c in sorted(federation.clients):
            self.members.setdefault(self.arch[c], []).append(c)
        #: the server's model of each architecture: a pseudo-client of the pool (negative id) on that frozen base
        self.slot = {a: -(i + 1) for i, a in enumerate(sorted(self.members))}
        allocation = {
            **federation.allocation,
            **{self.slot[a]: federation.allocation[m[0]] for a, m in self.members.items()},
        }
        allocation.update(self.extra_server_models(federation))
        self.clients.setup(dataclasses.replace(federation, allocation=allocation))
        self.federation = federation
        self.public = [s.for_method() for s in federation.public_data(self.config.public_size)]
        if not self.public:
            raise DrakeBenchError(
                f"{self.meta.name} distils on public data, but the federation's public-data hook gave no items"
            )
        pool = self.clients.pool
        self.size = {a: base_parameters(pool.model_for(s)) for a, s in self.slot.items()}
        pool.sync()
        if self.shared_vocabulary:
            self.check_shared_vocabulary()

    def extra_server_models(self, federation: FederationContext) -> dict[int, str]:
        """Pseudo-clients for server models outside the allocation (FedMKT's ``server_model``)."""
        return {}

    def tokenizer(self, client: int) -> Any:
        from drake_bench.models.engine import tokenizer_of

        return tokenizer_of(self.clients.pool.processor(client))

    def check_shared_vocabulary(self) -> None:
        """Refuse an allocation whose architectures tokenise the public answers differently: their logits would be
        compared position by position and token by token (PerAda averages them, TAKFL distils one into another)."""
        from drake_bench.models.prompting import target

        from .alignment import same_token_space

        texts = [target(s) for s in self.public]
        archs = sorted(self.slot)
        first = self.tokenizer(self.slot[archs[0]])
        vocab = {a: self.clients.pool.model_for(self.slot[a]).get_output_embeddings().weight.shape[0] for a in archs}
        self.clients.pool.sync()
        for a in archs[1:]:
            if vocab[a] != vocab[archs[0]] or not same_token_space(first, self.tokenizer(self.slot[a]), texts):
                raise DrakeBenchError(
                    f"{self.meta.name} compares logits of different architectures token by token, but {a} and "
                    f"{archs[0]} tokenise the public answers differently (or have different vocabularies: "
                    f"{vocab[a]} vs {vocab[archs[0]]}); use an allocation of one tokenizer, or fedmkt, which aligns "
                    "tokens across tokenizers"
                )

    # -- public data -------------------------------------------------------------------------------------------
    def window(self, round_idx: int) -> list[MethodSample]:
        return window(self.public, self.config.public_per_round, round_idx)

    def exchanges(self, ctx: Any) -> bool:
        """Whether this client call's upload reaches a server: a federation round. Fast adaptation on unseen tasks
        (contexts past the federation's rounds, message None) uploads nothing, so it computes no public logits."""
        return ctx.round_idx < self.federation.rounds

    # -- server models -----------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def server_model(self, slot: int, adapters: Mapping[str, Mapping[str, torch.Tensor]]) -> Iterator[tuple[Any, Any]]:
        """The server's model in pseudo-client ``slot``, with ``adapters`` (adapter name -> tensors) loaded; the
        caller reads trained adapters back with ``self.clients.pool.get_state(slot, name)`` inside the block."""
        pool = self.clients.pool
        for name, tensors in adapters.items():
            pool.set_state(slot, dict(tensors), name)
        with pool.use(slot) as model:
            yield model, pool.processor(slot)

    def distill(
        self,
        model: Any,
        processor: Any,
        items: Sequence[MethodSample],
        steps: int,
        loss_fn: Callable[[torch.Tensor, torch.Tensor, list[int]], torch.Tensor],
        optimizer: torch.optim.Optimizer,
        scheduler: Any = None,
    ) -> list[float]:
        """``steps`` optimizer steps on mini-batches of ``items`` (in order, wrapping around); ``loss_fn(student rows,
        answer tokens, item indices)`` is the step's loss. Returns the losses."""
        if not model.training:
            model.train()
        losses = []
        for step in range(steps):
            idx = minibatch(step, len(items), self.config.distill_batch)
            student, tokens, _ = answer_logits(model, processor, [items[i] for i in idx], self.config.packed_training)
            loss = loss_fn(student, tokens, idx)
            optimizer_step(loss, optimizer)
            if scheduler is not None:
                scheduler.step()
            losses.append(float(loss.detach()))
        return losses

    def window_loss(
        self,
        model: Any,
        processor: Any,
        items: Sequence[MethodSample],
        loss_fn: Callable[[torch.Tensor, torch.Tensor, list[int]], torch.Tensor],
    ) -> float:
        """``loss_fn`` on all of ``items`` at once, without gradients (eval mode): the distillation loss of the model as
        it stands on a fixed batch."""
        with eval_mode(model), torch.no_grad():
            student, tokens, _ = answer_logits(model, processor, list(items), self.config.packed_training)
            return float(loss_fn(student, tokens, list(range(len(items)))))

    def report_loss(
        self,
        model: Any,
        processor: Any,
        items: Sequence[MethodSample],
        loss_fn: Callable[[torch.Tensor, torch.Tensor, list[int]], torch.Tensor],
    ) -> float | None:
        """:meth:`window_loss` for the diagnostics when they are on, else None (no forward pass)."""
        return self.window_loss(model, processor, items, loss_fn) if self.config.report_diagnostics else None

    # -- optional protocols --------------------------------------------------------------------------------------
    def round_diagnostics(self, round_idx: int) -> list[Diagnostic]:
        """The server step's own account (distillation losses before and after, choices made); see each method."""
        rows, self._rows = self._rows, []
        return rows

    def init_server(self) -> State:
        return State()
