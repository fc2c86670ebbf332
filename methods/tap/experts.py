"""The components as named peft LoRA adapters, and how a copy of them trains and answers.

Every client model is its architecture's frozen base with one named peft LoRA adapter per component
(:func:`.keys.components`: ``shared``, ``mod-<m>``, ``fmt-<f>``, ``exp-<m>-<f>``), all on the language model's
feed-forward linears (``targets='mlp'``; ``'all'``: every decoder linear), one :class:`~drake_bench.models.ModelPool`
slot each. A forward pass for task key o runs with the four adapters of its path active at once (peft's LoRA layers
sum their active adapters; :func:`set_active` sets which), each scaled by 1/4 under ``combine='mean'`` (peft's
``set_scale``, set once when the adapters are attached)::

    h = W0 x + sum_{c in path(o)} w (alpha / r) B_c A_c x,     w = 1/4 ('mean') or 1 ('sum')

so the paper's "route to the experts of (modality, task)" is one forward pass through one peft model, with no
hand-rolled module. Components off the path cost nothing (inactive adapters are skipped by peft).

A *copy* (the FL copy, the personal copy, the teacher) is a dict ``{component: {peft key: tensor}}`` kept in the
client's State; :meth:`ExpertClients.load_copy` writes it into the adapter slots (components it lacks at their
initialisation, which is the same for every client of an architecture), :meth:`ExpertClients.dump_copy` reads
components back. The two copies therefore share slots and never coexist in the model.

A batch holds items of several keys, and peft activates one adapter set per forward pass, so a step runs one
forward and backward pass per key in the batch (the key's sub-batch, loss weighted by its share lambda_o of the
batch, the paper's sum_o lambda_o l_o), accumulates the gradients, then takes one optimiser step: the same step as
the paper's routed mixture, whose experts each see only their task's items.
"""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from drake_bench.benchmarks.sample import MethodSample
from drake_bench.models.adapters import LLM_LINEAR_TARGETS
from drake_bench.plugins.protocol import FederationContext

from ..lora_clients import LoraClients
from .config import RoundSettings
from .distill import TeacherLogits, distill_loss
from .history import RunningLoss
from .keys import PATH_LENGTH, SHARED, components, group_by_key, modalities_of, path

TARGETS: dict[str, str] = {
    "mlp": r"^(?!.*vision_tower).*\.(gate_proj|up_proj|down_proj)$",
    "all": LLM_LINEAR_TARGETS,
}
"""Full-match regexes over module names: the language model's feed-forward linears, or all its decoder linears (the
package's ``LLM_LINEAR_TARGETS``); the vision tower is never adapted."""

Copy = dict[str, dict[str, torch.Tensor]]
"""One copy of a client's components: component name -> peft state-dict key -> tensor."""


def lora_layers(model: Any) -> list[Any]:
    from peft.tuners.lora import LoraLayer

    return [m for m in model.modules() if isinstance(m, LoraLayer)]


def adapter_parameters(model: Any) -> list[torch.nn.Parameter]:
    """Every LoRA matrix of every component (whatever is active), in the model's order: what an optimiser holds."""
    return [p for n, p in model.named_parameters() if ".lora_A." in n or ".lora_B." in n]


_LAYERS: "weakref.WeakKeyDictionary[Any, list[Any]]" = weakref.WeakKeyDictionary()


def set_active(model: Any, names: list[str]) -> None:
    """Make ``names`` the active adapters of every LoRA layer (the layers found once per model).

    peft's ``set_adapter`` also sets ``requires_grad`` on every adapter of every layer at each call, which cost an
    eighth of a training step here, where the active set changes at every sub-batch. So the LoRA matrices of every
    component stay trainable (:func:`trainable`) and only the layers' active set changes: an inactive adapter takes
    no part in the forward pass, so it gets no gradient and the optimiser leaves it alone. The active set is what
    peft's ``LoraLayer.set_adapter`` records (``_active_adapter``, read back through its public
    ``active_adapters``); should a peft version keep it elsewhere, the check below falls back to ``set_adapter``.
    """
    layers = _LAYERS.get(model)
    if layers is None:
        layers = _LAYERS[model] = lora_layers(model)
    for layer in layers:
        layer._active_adapter = names
    if layers and list(layers[0].active_adapters) != list(names):  # pragma: no cover - a peft without the attribute
        for layer in layers:
            layer.set_adapter(names)
    model.base_model.active_adapter = names  # what peft's own LoraModel.set_adapter records


def trainable(params: Sequence[torch.nn.Parameter]) -> None:
    """Every component's LoRA matrices require gradients (what peft's ``set_adapter`` does for the active ones)."""
    for p in params:
        p.requires_grad_(True)


def activate(model: Any, key: str) -> None:
    """Make the adapters of ``key``'s path the active (and only trainable) ones."""
    set_active(model, list(path(key)))


def rest(model: Any) -> None:
    """The pool's resting state: the first adapter (``shared``) alone active."""
    set_active(model, [SHARED])


def answer_loss(
    model: Any, processor: Any, items: Sequence[MethodSample], with_logits: bool = False, packed: bool = True
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The mean cross-entropy over the items' answer tokens (+ eos), the positions ``drake_bench.models.loss_on``
    scores, and optionally the logits predicting those tokens (tokens x vocabulary, float32, in item order): one
    forward pass gives both, so Stage 2's task loss and distillation term read the same logits. ``packed``: the
    settings' ``packed_training`` (``drake_bench.models.engine.answer_logits``)."""
    from drake_bench.models.engine import answer_logits, packing

    picked, targets, _ = answer_logits(model, processor, list(items), packed=packing(packed))
    loss = F.cross_entropy(picked, targets, reduction="sum") / max(targets.numel(), 1)
    return loss, (picked if with_logits else None)


def fingerprint(copy: Mapping[str, Mapping[str, torch.Tensor]]) -> str:
    """A digest of a copy's names and values (exact: any changed bit gives another digest)."""
    h = hashlib.blake2b(digest_size=16)
    for comp in sorted(copy):
        for key in sorted(copy[comp]):
            t = copy[comp][key].detach().cpu().contiguous()
            h.update(f"{comp}/{key}:{t.dtype}:{tuple(t.shape)}".encode())
            h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


class ExpertClients(LoraClients):
    """The model pool with one LoRA adapter per component (:mod:`.keys`), and copies loaded into and out of it."""

    def __init__(self, settings: RoundSettings):
        super().__init__(settings, adapter_names=components())
        self.components = components()
        self._init: dict[str, Copy] = {}
        self._params: dict[str, list[torch.nn.Parameter]] = {}

    def adapter_config(self, model_name: str) -> Any:
        """A LoRA adapter of the settings' rank and alpha on the language model's feed-forward linears (``targets =
        'mlp'``) or on all its linears (``'all'``, the LoRA entries' targets); every component has the same."""
        from drake_bench.models import lora_config

        return lora_config(
            r=self.settings.rank, alpha=self.settings.alpha, target_modules=TARGETS[self.settings.targets]
        )

    def post_attach(self, model: Any) -> None:
        """Each component's update at 1/4 of its scale under ``combine='mean'`` (the mean of the four routes)."""
        if self.settings.combine == "mean":
            for layer in lora_layers(model):
                for adapter in self.components:
                    layer.set_scale(adapter, 1.0 / PATH_LENGTH)

    def setup(self, federation: FederationContext) -> None:
        """The pool with one adapter per component the benchmark's items can use (10 on a text benchmark, 20 on a
        multimodal one), holding one slot set per architecture.

        The pool's bases take the settings' ``segment_attention`` (packed training steps attend per item, or under
        the block-diagonal mask when it is off), as every LoRA entry's pool does.

        Every copy lives in its client's State and is written into the slots before each use, so the pool's own
        per-client storage would only be copied in and out for nothing: the pool is built over one
        representative client per architecture, and every client of that architecture works in its slots."""
        from drake_bench.models import ModelPool
        from drake_bench.models.zoo import architecture_key

        self.components = components(modalities_of(federation.modality))
        self.adapter_names = tuple(self.components)
        reps: dict[str, int] = {}
        for c in sorted(federation.allocation):
            reps.setdefault(architecture_key(federation.allocation[c]), c)
        self.rep = {c: reps[architecture_key(name)] for c, name in federation.allocation.items()}
        self.pool = ModelPool(
            {r: federation.allocation[r] for r in reps.values()},
            self.adapter_config,
            device=federation.device,
            offload_dir=self.settings.offload_dir,
            adapter_names=self.adapter_names,
            seed=federation.seed,
            loader=self.loader,
            post_attach=self.post_attach,
            segment_attention=self.settings.segment_attention,
        )
        self.federation = federation
        self._init, self._params, self._loaded = {}, {}, {}

    # -- copies ------------------------------------------------------------------------------------------------
    def model(self, client: int) -> Any:
        """The peft model of the client's architecture (its slots hold whatever copy was written last)."""
        return self.pool.model_for(self.rep[client])

    def processor(self, client: int) -> Any:
        return self.pool.processor(self.rep[client])

    def initial_copy(self, client: int) -> Copy:
        """Every component at its initialisation, the same for every client of an architecture (shared, not cloned:
        callers must not write into it)."""
        rep = self.rep[client]
        if rep not in self._init:
            self._init[rep] = {c: self.pool.initial_state(rep, c) for c in self.components}
        return self._init[rep]

    def load_copy(self, client: int, copy: Mapping[str, Mapping[str, torch.Tensor]], reuse: bool = False) -> None:
        """Write a copy into the adapter slots of the client's architecture; components it lacks take their
        initialisation. ``reuse``: skip the writing when the slots already hold exactly this copy (prediction
        calls for one client's tasks come one after another with the same State)."""
        rep = self.rep[client]
        mark = fingerprint(copy) if reuse else None
        if mark is not None and self._loaded.get(rep) == mark:
            return
        init = self.initial_copy(client)
        self.pool.model_for(rep)
        for comp in self.components:
            self.pool.set_state(rep, copy.get(comp, init[comp]), adapter=comp)
        self._loaded[rep] = mark

    def dump_copy(self, client: int, comps: Sequence[str]) -> Copy:
        """The named components as they stand in the slots of the client's architecture (CPU copies)."""
        return {c: self.pool.get_state(self.rep[client], c) for c in comps}

    def parameters_of(self, client: int, model: Any) -> list[torch.nn.Parameter]:
        rep = self.rep[client]
        if rep not in self._params:
            self._params[rep] = adapter_parameters(model)
        return self._params[rep]

    # -- training ----------------------------------------------------------------------------------------------
    def train_copy(
        self,
        client: int,
        copy: Mapping[str, Mapping[str, torch.Tensor]],
        batches: Sequence[Sequence[MethodSample]],
        lr: float,
        teacher: TeacherLogits | None = None,
        beta: Callable[[str], float] | None = None,
        temperature: float = 1.0,
    ) -> tuple[Copy, RunningLoss]:
        """Train ``copy`` on ``batches`` with a fresh AdamW at ``lr`` (the paper's new optimiser per local-training
        call); every step is sum_o lambda_o l_o over the batch's keys, plus, with ``teacher``, sum_o beta_o
        distill_o (eq. 6: lambda_o does not weight the distillation term). Returns the trained copy (every
        component the copy held, plus those trained) and the pass's running history values."""
        history = RunningLoss()
        self.load_copy(client, copy)
        self._loaded[self.rep[client]] = None  # the slots are about to change
        model, processor = self.model(client), self.processor(client)
        params = self.parameters_of(client, model)
        trainable(params)
        opt = torch.optim.AdamW([{"params": params, "lr": lr, "weight_decay": self.settings.weight_decay}])
        trained: set[str] = set()
        model.train()
        try:
            for b, batch in enumerate(batches):
                if not len(batch):
                    continue
                contributions: dict[str, float] = {}
                for key, idx in group_by_key(batch).items():
                    items = [batch[i] for i in idx]
                    activate(model, key)
                    kd = teacher is not None and beta is not None and beta(key) > 0
                    loss, logits = answer_loss(
                        model, processor, items, with_logits=kd, packed=self.settings.packed_training
                    )
                    share = len(items) / len(batch)
                    total = share * loss
                    if kd:
                        total = total + beta(key) * distill_loss(logits, teacher[b][key], temperature, len(items))
                    total.backward()
                    contributions[key] = share * float(loss.detach())
                    trained.update(path(key))
                if self.settings.max_grad_norm is not None:
                    torch.nn.utils.clip_grad_norm_(
                        [p for p in params if p.grad is not None], self.settings.max_grad_norm
                    )
                opt.step()
                opt.zero_grad(set_to_none=True)
                history.add_batch(contributions)
        finally:
            rest(model)
        keep = [c for c in self.components if c in copy or c in trained]
        return self.dump_copy(client, keep), history

    def teacher_logits(
        self, client: int, copy: Mapping[str, Mapping[str, torch.Tensor]], batches: Sequence[Sequence[MethodSample]]
    ) -> TeacherLogits:
        """The frozen teacher's answer-token logits for every key of every batch (eval mode, no gradients), computed
        once before the student trains: the teacher never changes, so this is the same as running it beside the
        student at every step, without holding two copies in the model."""
        out: TeacherLogits = []
        self.load_copy(client, copy, reuse=True)
        model, processor = self.model(client), self.processor(client)
        was = model.training
        model.eval()
        try:
            with torch.no_grad():
                for batch in batches:
                    row = {}
                    for key, idx in group_by_key(batch).items():
                        activate(model, key)
                        row[key] = answer_loss(
                            model,
                            processor,
                            [batch[i] for i in idx],
                            with_logits=True,
                            packed=self.settings.packed_training,
                        )[1]
                    out.append(row)
        finally:
            rest(model)
            model.train(was)
        return out

    # -- answering ---------------------------------------------------------------------------------------------
    def predict_copy(
        self, client: int, copy: Mapping[str, Mapping[str, torch.Tensor]], queries: Sequence[MethodSample]
    ) -> list[str]:
        """Answers with ``copy``: each query through the path of its own key (queries grouped by key, answers put
        back in order)."""
        from drake_bench.models import predict

        answers: list[str | None] = [None] * len(queries)
        self.load_copy(client, copy, reuse=True)
        model, processor = self.model(client), self.processor(client)
        try:
            for key, idx in group_by_key(queries).items():
                activate(model, key)
                for i, a in zip(idx, predict(model, processor, [queries[i] for i in idx])):
                    answers[i] = a
        finally:
            rest(model)
        return [a if a is not None else "" for a in answers]
