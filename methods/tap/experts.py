"""The components as named peft LoRA adapters, and how a copy of them trains and answers.

Every client model is its architecture's frozen base with one named peft LoRA adapter per component
(:func:`.keys.components`: ``shared``, ``mod-<m>``, ``fmt-<f>``, ``exp-<m>-<f>``), all on the language model's
linear layers, one :class:`~drake_bench.models.ModelPool` slot each. A forward pass for task key o activates the
four adapters of its path at once (peft's multi-adapter ``set_adapter``), each scaled by 1/4 under ``combine =
'mean'`` (peft's ``set_scale``, set once when the adapters are attached)::

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

import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from drake_bench.protocol import FederationContext
from drake_bench.sample import MethodSample

from ..lora_clients import LoraClients
from .config import RoundSettings
from .distill import TeacherLogits, distill_loss
from .history import RunningLoss
from .keys import PATH_LENGTH, SHARED, components, group_by_key, modalities_of, path

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
    """peft's ``set_adapter`` on every LoRA layer (the active adapters, and only they trainable), the layers found
    once per model: the model-wide ``set_adapter`` walks every module at every call, which cost as much as the
    forward pass of a tiny model."""
    layers = _LAYERS.get(model)
    if layers is None:
        layers = _LAYERS[model] = lora_layers(model)
    for layer in layers:
        layer.set_adapter(names)
    model.base_model.active_adapter = names  # what peft's own LoraModel.set_adapter records


def activate(model: Any, key: str) -> None:
    """Make the adapters of ``key``'s path the active (and only trainable) ones."""
    set_active(model, list(path(key)))


def rest(model: Any) -> None:
    """The pool's resting state: the first adapter (``shared``) alone active."""
    set_active(model, [SHARED])


def answer_loss(model: Any, processor: Any, items: Sequence[MethodSample], with_logits: bool = False
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The mean cross-entropy over the items' answer tokens (+ eos), the positions ``drake_bench.models.loss_on``
    scores, and optionally the logits predicting those tokens (tokens x vocabulary, float32, in item order): one
    forward pass gives both, so Stage 2's task loss and distillation term read the same logits."""
    from drake_bench.models.engine import IGNORE_INDEX, autocast, encode_for_training

    inputs = encode_for_training(model, processor, list(items))
    labels = inputs.pop("labels")
    targets = labels[:, 1:]
    valid = (targets != IGNORE_INDEX).any(0).nonzero()
    first = int(valid[0]) if len(valid) else targets.shape[1] - 1
    with autocast(model):
        logits = model(**inputs, logits_to_keep=labels.shape[1] - first).logits
    targets = targets[:, first:]
    logits = logits[:, : targets.shape[1]].float()
    mask = targets != IGNORE_INDEX
    picked = logits[mask]
    loss = F.cross_entropy(picked, targets[mask], reduction="sum") / mask.sum().clamp(min=1)
    return loss, (picked if with_logits else None)


class ExpertClients(LoraClients):
    """The model pool with one LoRA adapter per component (:mod:`.keys`), and copies loaded into and out of it."""

    def __init__(self, settings: RoundSettings):
        super().__init__(settings, adapter_names=components())
        self.components = components()
        self._init: dict[str, Copy] = {}
        self._params: dict[str, list[torch.nn.Parameter]] = {}

    def post_attach(self, model: Any) -> None:
        """Each component's update at 1/4 of its scale under ``combine='mean'`` (the mean of the four routes)."""
        if self.settings.combine == "mean":
            for layer in lora_layers(model):
                for adapter in self.components:
                    layer.set_scale(adapter, 1.0 / PATH_LENGTH)

    def setup(self, federation: FederationContext) -> None:
        """The pool with one adapter per component the benchmark's items can use (10 on a text benchmark, 20 on a
        multimodal one)."""
        self.components = components(modalities_of(federation.modality))
        self.adapter_names = tuple(self.components)
        super().setup(federation)
        self._init, self._params = {}, {}

    # -- copies ------------------------------------------------------------------------------------------------
    def initial_copy(self, client: int) -> Copy:
        """Every component at its initialisation, the same for every client of an architecture (shared, not cloned:
        callers must not write into it)."""
        arch = self.pool.architecture(client)
        if arch not in self._init:
            self._init[arch] = {c: self.pool.initial_state(client, c) for c in self.components}
        return self._init[arch]

    def load_copy(self, client: int, copy: Mapping[str, Mapping[str, torch.Tensor]]) -> None:
        """Write a copy into the client's adapter slots; components it lacks take their initialisation."""
        init = self.initial_copy(client)
        for comp in self.components:
            self.pool.set_state(client, copy.get(comp, init[comp]), adapter=comp)

    def dump_copy(self, client: int, comps: Sequence[str]) -> Copy:
        """The named components as they stand in the client's slots (CPU copies)."""
        return {c: self.pool.get_state(client, c) for c in comps}

    def parameters_of(self, client: int, model: Any) -> list[torch.nn.Parameter]:
        arch = self.pool.architecture(client)
        if arch not in self._params:
            self._params[arch] = adapter_parameters(model)
        return self._params[arch]

    # -- training ----------------------------------------------------------------------------------------------
    def train_copy(self, client: int, copy: Mapping[str, Mapping[str, torch.Tensor]],
                   batches: Sequence[Sequence[MethodSample]], lr: float,
                   teacher: TeacherLogits | None = None, beta: Callable[[str], float] | None = None,
                   temperature: float = 1.0) -> tuple[Copy, RunningLoss]:
        """Train ``copy`` on ``batches`` with a fresh AdamW at ``lr`` (the paper's new optimiser per local-training
        call); every step is sum_o lambda_o l_o over the batch's keys, plus, with ``teacher``, sum_o beta_o
        distill_o (eq. 6: lambda_o does not weight the distillation term). Returns the trained copy (every
        component the copy held, plus those trained) and the pass's running history values."""
        history = RunningLoss()
        with self.pool.use(client) as model:
            self.load_copy(client, copy)
            processor = self.pool.processor(client)
            params = self.parameters_of(client, model)
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
                        loss, logits = answer_loss(model, processor, items, with_logits=kd)
                        share = len(items) / len(batch)
                        total = share * loss
                        if kd:
                            total = total + beta(key) * distill_loss(logits, teacher[b][key], temperature, len(items))
                        total.backward()
                        contributions[key] = share * float(loss.detach())
                        trained.update(path(key))
                    if self.settings.max_grad_norm is not None:
                        torch.nn.utils.clip_grad_norm_([p for p in params if p.grad is not None],
                                                       self.settings.max_grad_norm)
                    opt.step()
                    opt.zero_grad(set_to_none=True)
                    history.add_batch(contributions)
            finally:
                rest(model)
            keep = [c for c in self.components if c in copy or c in trained]
            return self.dump_copy(client, keep), history

    def teacher_logits(self, client: int, copy: Mapping[str, Mapping[str, torch.Tensor]],
                       batches: Sequence[Sequence[MethodSample]]) -> TeacherLogits:
        """The frozen teacher's answer-token logits for every key of every batch (eval mode, no gradients), computed
        once before the student trains: the teacher never changes, so this is the same as running it beside the
        student at every step, without holding two copies in the model."""
        out: TeacherLogits = []
        with self.pool.use(client) as model:
            self.load_copy(client, copy)
            processor = self.pool.processor(client)
            was = model.training
            model.eval()
            try:
                with torch.no_grad():
                    for batch in batches:
                        row = {}
                        for key, idx in group_by_key(batch).items():
                            activate(model, key)
                            row[key] = answer_loss(model, processor, [batch[i] for i in idx], with_logits=True)[1]
                        out.append(row)
            finally:
                rest(model)
                model.train(was)
        return out

    # -- answering ---------------------------------------------------------------------------------------------
    def predict_copy(self, client: int, copy: Mapping[str, Mapping[str, torch.Tensor]],
                     queries: Sequence[MethodSample]) -> list[str]:
        """Answers with ``copy``: each query through the path of its own key (queries grouped by key, answers put
        back in order)."""
        from drake_bench.models import predict

        answers: list[str | None] = [None] * len(queries)
        with self.pool.use(client) as model:
            self.load_copy(client, copy)
            processor = self.pool.processor(client)
            try:
                for key, idx in group_by_key(queries).items():
                    activate(model, key)
                    for i, a in zip(idx, predict(model, processor, [queries[i] for i in idx])):
                        answers[i] = a
            finally:
                rest(model)
        return [a if a is not None else "" for a in answers]
