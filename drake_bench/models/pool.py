"""One frozen base per architecture, many clients: adapters swapped in and out.

A federation of N clients on one architecture needs the base once plus N
adapters, not N models (52 Fed-LLM-Large clients; 1,000 in a scaling study). The
pool loads each architecture's base once (:func:`drake_bench.models.load_base`),
wraps it with peft (one named adapter slot per adapter name), and keeps every
client's adapter tensors on CPU, or in safetensors files under ``offload_dir``.
``use(client)`` copies that client's tensors into the live adapter slots and copies
them back out on exit; the parameters themselves are the same objects for every
client of an architecture, so an optimiser built on ``trainable_parameters`` during
``use`` trains whichever client is swapped in (build a fresh optimiser per client).

Initial adapters: every client of one architecture starts from the same adapter
initialisation (seeded by ``seed``), like a federated run whose server broadcasts one
initial global adapter. ``adapter_config`` may be one ``PeftConfig`` or a callable
receiving the client's zoo model name; all clients of an architecture share its
adapter shapes unless ``client_ranks`` is given.

Per-client LoRA ranks within an architecture (``client_ranks``, client -> rank; the
rank-heterogeneous setting of HETLoRA / FedMosaic App. A.24): the shared base gets one
peft adapter slot per distinct rank of its clients, through peft's multi-adapter API
(``add_adapter`` / ``set_adapter``), and ``use(client)`` activates the client's slot. Choices:

- [R] The architecture's largest rank keeps the adapter's own name (``"default"``), so code that
  addresses the adapter by name (alignment, state helpers) sees the widest slot; a smaller rank r
  is the slot ``"<adapter>_r<r>"``. peft selects a slot's tensors by dot-delimited name, so the
  names cannot collide. An architecture whose clients share one rank has exactly the slots and
  tensors of a pool without ``client_ranks`` (and, at the config's own rank, the same values).
- [R] A slot of rank r is the configured adapter with ``r`` replaced and ``lora_alpha`` scaled by
  r / r_config, so every client keeps the configured LoRA scale alpha / r: updates of different
  ranks stay on one scale, which zero-padded factor averaging (HETLoRA) needs.
- [R] Nested initialisation: a smaller slot starts from the leading block of the largest slot's
  initial tensors (``rank_axes`` names which axes of which weight carry the rank: rows of
  ``lora_A``, columns of ``lora_B`` by default), like HETLoRA's server sending each client the
  truncation of one initial global adapter; the coordinates a low-rank client trains are then the
  same coordinates as the first ones of a high-rank client.
- Client states keep the logical adapter names and peft's slot-independent keys, each with the
  client's own shapes.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from drake_bench.errors import DrakeBenchError, UnknownNameError
from drake_bench.models.engine import use_segment_attention_if_packable
from drake_bench.models.loading import load_base
from drake_bench.models.zoo import architecture_key


@dataclass
class _Arch:
    key: str
    model_name: str
    model: Any  # the PeftModel over the frozen base
    processor: Any
    live: dict[str, dict[str, torch.Tensor]]  # adapter -> key -> live tensor (shares the parameter's storage)
    init: dict[str, dict[str, torch.Tensor]]  # adapter -> initial state (CPU copy)
    active: int | None = None
    clients: list[int] = field(default_factory=list)
    slots: dict[tuple[str, int | None], str] = field(default_factory=dict)  # (adapter, rank) -> peft adapter slot

    @property
    def multi_rank(self) -> bool:
        return len({r for _, r in self.slots}) > 1


#: Which axes of which adapter weight carry the LoRA rank (used to nest smaller slots in larger ones).
DEFAULT_RANK_AXES: dict[str, tuple[int, ...]] = {"lora_A": (0,), "lora_B": (1,)}


def _weight_name(key: str, rank_axes: Mapping[str, tuple[int, ...]]) -> str | None:
    """The ``lora_*`` segment of a peft state key (``...q_proj.lora_A.weight`` -> ``lora_A``) named in rank_axes."""
    for part in key.split("."):
        if part in rank_axes:
            return part
    return None


def resize_state(
    state: Mapping[str, torch.Tensor], rank: int, rank_axes: Mapping[str, tuple[int, ...]] = DEFAULT_RANK_AXES
) -> dict[str, torch.Tensor]:
    """An adapter state at another rank: the leading block (truncation) or zero padding along the rank axes.

    Tensors of weights not named in ``rank_axes`` are copied unchanged (e.g. FedMosaic's gates)."""
    out: dict[str, torch.Tensor] = {}
    for k, v in state.items():
        name = _weight_name(k, rank_axes)
        if name is None:
            out[k] = v.clone()
            continue
        shape = list(v.shape)
        for ax in rank_axes[name]:
            shape[ax] = rank
        t = v.new_zeros(shape)
        t[tuple(slice(0, min(v.shape[d], rank)) if d in rank_axes[name] else slice(None) for d in range(v.dim()))] = v[
            tuple(slice(0, min(v.shape[d], rank)) if d in rank_axes[name] else slice(None) for d in range(v.dim()))
        ]
        out[k] = t
    return out


def _tensor_bytes(tensors: Iterator[torch.Tensor] | Sequence[torch.Tensor]) -> int:
    """Bytes of distinct storages behind ``tensors`` (shared storage counted once)."""
    seen: dict[int, int] = {}
    for t in tensors:
        st = t.untyped_storage()
        seen[st.data_ptr()] = st.nbytes()
    return sum(seen.values())


class ModelPool:
    """Per-client adapters over one shared frozen base per architecture."""

    def __init__(
        self,
        allocation: Mapping[int, str],
        adapter_config: Callable[[str], Any] | Any,
        device: str = "cpu",
        offload_dir: str | Path | None = None,
        *,
        adapter_names: Sequence[str] = ("default",),
        dtype: Any = None,
        seed: int = 0,
        loader: Callable[..., tuple[Any, Any]] | None = None,
        post_attach: Callable[[Any], None] | None = None,
        client_ranks: Mapping[int, int] | None = None,
        rank_axes: Mapping[str, tuple[int, ...]] | None = None,
        segment_attention: bool = True,
    ) -> None:
        if not adapter_names:
            raise DrakeBenchError("ModelPool needs at least one adapter name")
        self.allocation = {int(k): v for k, v in allocation.items()}
        self.device, self.dtype, self.seed = device, dtype, seed
        self.adapter_names = list(adapter_names)
        self._config_fn = adapter_config if callable(adapter_config) else (lambda _name: adapter_config)
        self._loader = loader or load_base
        self._post_attach = post_attach  # called on each new PeftModel before init states are captured
        self.segment_attention = segment_attention  # packed training attends per item (drake_bench.models.kernels)
        self.offload_dir = Path(offload_dir) if offload_dir is not None else None
        self._archs: dict[str, _Arch] = {}
        self._states: dict[tuple[int, str], dict[str, torch.Tensor]] = {}
        self._arch_of = {cid: architecture_key(name) for cid, name in self.allocation.items()}
        unknown = sorted(set(int(c) for c in (client_ranks or {})) - set(self.allocation))
        if unknown:
            raise DrakeBenchError(
                f"client_ranks names clients {unknown} that the allocation does not have "
                f"(its clients: {sorted(self.allocation)})"
            )
        bad = {int(c): r for c, r in (client_ranks or {}).items() if int(r) < 1}
        if bad:
            raise DrakeBenchError(f"client_ranks: ranks must be >= 1, got {bad}")
        #: client -> its rank, or None where the adapter config's own rank applies (no client_ranks given)
        self._rank: dict[int, int | None] = {c: None for c in self.allocation}
        self._has_ranks = client_ranks is not None
        if client_ranks is not None:
            self._rank.update({int(c): int(r) for c, r in client_ranks.items()})
        self.rank_axes: dict[str, tuple[int, ...]] = {**DEFAULT_RANK_AXES, **dict(rank_axes or {})}
        if self.offload_dir is not None:
            self.offload_dir.mkdir(parents=True, exist_ok=True)

    # ------------------------------------------------------------------ lookup
    def clients(self) -> list[int]:
        return sorted(self.allocation)

    def _check(self, client_id: int) -> int:
        if client_id not in self.allocation:
            raise UnknownNameError("client", client_id, [str(c) for c in self.clients()], where="ModelPool")
        return client_id

    def architecture(self, client_id: int) -> str:
        """Architecture key of the client's model (clients with equal keys share one base)."""
        return self._arch_of[self._check(client_id)]

    def model_name(self, client_id: int) -> str:
        return self.allocation[self._check(client_id)]

    def architectures(self) -> dict[str, list[int]]:
        """Architecture key -> its clients (for methods that group clients by architecture)."""
        out: dict[str, list[int]] = {}
        for cid in self.clients():
            out.setdefault(self._arch_of[cid], []).append(cid)
        return out

    def rank(self, client_id: int) -> int:
        """The client's LoRA rank (``client_ranks``, else the adapter config's ``r``)."""
        r = self._rank[self._check(client_id)]
        return int(r) if r is not None else int(self._config_fn(self.model_name(client_id)).r)

    def slot(self, client_id: int, adapter: str = "default") -> str:
        """The peft adapter slot holding the client's ``adapter`` (its own name unless the architecture mixes ranks)."""
        self._check_adapter(adapter, self._check(client_id))
        return self._arch(self.architecture(client_id)).slots[(adapter, self._rank[client_id])]

    def resize(self, state: Mapping[str, torch.Tensor], rank: int) -> dict[str, torch.Tensor]:
        """``resize_state`` with this pool's ``rank_axes``: truncate or zero-pad an adapter state to ``rank``."""
        return resize_state(state, rank, self.rank_axes)

    def processor(self, client_id: int) -> Any:
        """The client's processor (multimodal) or tokenizer (text)."""
        return self._arch(self.architecture(client_id)).processor

    # ------------------------------------------------------------------ bases
    def _arch(self, key: str) -> _Arch:
        if key in self._archs:
            return self._archs[key]
        from peft import get_peft_model
        from peft.utils import get_peft_model_state_dict

        clients = self.architectures()[key]
        name = self.allocation[clients[0]]
        base, processor = self._loader(name, device=self.device, dtype=self.dtype)
        base.requires_grad_(False)
        if self.segment_attention:
            use_segment_attention_if_packable(base)
        base_cfg = self._config_fn(name)
        if self._has_ranks:  # clients client_ranks does not name keep the adapter config's rank
            self._rank.update({c: int(base_cfg.r) for c in clients if self._rank[c] is None})
        # one slot per (adapter, distinct rank); the largest rank keeps the adapter's own name
        ranks = sorted({self._rank[c] for c in clients}, key=lambda r: -1 if r is None else r, reverse=True)
        slots: dict[tuple[str, int | None], str] = {}
        configs: list[tuple[str, Any]] = []
        for i, r in enumerate(ranks):
            cfg = base_cfg
            if r is not None and r != base_cfg.r:
                cfg = copy.deepcopy(base_cfg)
                cfg.lora_alpha = base_cfg.lora_alpha * r / base_cfg.r  # keep the LoRA scale alpha / r
                cfg.r = r
            for a in self.adapter_names:
                slots[(a, r)] = a if i == 0 else f"{a}_r{r}"
                configs.append((slots[(a, r)], cfg))
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            (first, first_cfg), *rest = configs
            model = get_peft_model(base, copy.deepcopy(first_cfg), adapter_name=first)
            for a, cfg in rest:
                model.add_adapter(a, copy.deepcopy(cfg))
            if self._post_attach is not None:  # e.g. FedMosaic's tie_layer_gates
                self._post_attach(model)
        model.set_adapter(self.adapter_names[0])
        live = {s_: get_peft_model_state_dict(model, adapter_name=s_, save_embedding_layers=False) for s_, _ in configs}
        if len(ranks) > 1:  # nested initialisation: a smaller slot starts at the leading block of the largest
            with torch.no_grad():
                for (a, r), s_ in slots.items():
                    if s_ != a:
                        for k, v in resize_state(live[a], int(r), self.rank_axes).items():
                            if tuple(v.shape) != tuple(live[s_][k].shape):
                                raise DrakeBenchError(
                                    f"{key}: slot {s_!r} tensor {k} has shape "
                                    f"{tuple(live[s_][k].shape)}, its rank axes give {tuple(v.shape)}"
                                    " (name the weight's rank axes in rank_axes)"
                                )
                            live[s_][k].copy_(v)
        init = {s_: {k: v.detach().to("cpu", copy=True) for k, v in live[s_].items()} for s_, _ in configs}
        arch = _Arch(key, name, model, processor, live, init, None, clients, slots)
        self._archs[key] = arch
        for cid in clients:  # each client owns its adapter tensors from the start
            for a in self.adapter_names:
                self._put(cid, a, {k: v.clone() for k, v in init[slots[(a, self._rank[cid])]].items()})
        return arch

    # ------------------------------------------------------------------ storage
    def _file(self, client_id: int, adapter: str) -> Path:
        assert self.offload_dir is not None
        return self.offload_dir / f"client_{client_id}" / f"{adapter}.safetensors"

    def _put(self, client_id: int, adapter: str, state: dict[str, torch.Tensor]) -> None:
        if self.offload_dir is None:
            self._states[(client_id, adapter)] = state
            return
        from safetensors.torch import save_file

        f = self._file(client_id, adapter)
        f.parent.mkdir(parents=True, exist_ok=True)
        save_file({k: v.contiguous() for k, v in state.items()}, str(f))

    def _get(self, client_id: int, adapter: str) -> dict[str, torch.Tensor]:
        if self.offload_dir is None:
            return self._states[(client_id, adapter)]
        from safetensors.torch import load_file

        return load_file(str(self._file(client_id, adapter)))

    def _check_adapter(self, adapter: str, client_id: int) -> None:
        if adapter not in self.adapter_names:
            raise UnknownNameError("adapter", adapter, self.adapter_names, where=f"ModelPool client {client_id}")

    # ------------------------------------------------------------------ swapping
    def _swap_out(self, arch: _Arch) -> None:
        if arch.active is None:
            return
        for a in self.adapter_names:
            live = arch.live[arch.slots[(a, self._rank[arch.active])]]
            self._put(arch.active, a, {k: v.detach().to("cpu", copy=True) for k, v in live.items()})
        arch.active = None

    def _swap_in(self, client_id: int) -> _Arch:
        arch = self._arch(self.architecture(client_id))
        if arch.active == client_id:
            return arch
        self._swap_out(arch)
        with torch.no_grad():
            for a in self.adapter_names:
                state = self._get(client_id, a)
                for k, t in arch.live[arch.slots[(a, self._rank[client_id])]].items():
                    t.copy_(state[k])
        if arch.multi_rank:  # activate the client's rank slot (single-rank pools never switch)
            arch.model.set_adapter(arch.slots[(self.adapter_names[0], self._rank[client_id])])
        arch.active = client_id
        return arch

    def model_for(self, client_id: int) -> Any:
        """Swap the client's adapters into its architecture's base and return the peft model.

        The client stays swapped in until another client of the same architecture is
        requested (its tensors are then saved back) or :meth:`sync` is called.
        """
        return self._swap_in(self._check(client_id)).model

    @contextlib.contextmanager
    def use(self, client_id: int) -> Iterator[Any]:
        """Context manager: the client's peft model; its adapter tensors are saved back on exit."""
        arch = self._swap_in(self._check(client_id))
        try:
            yield arch.model
        finally:
            if arch.active == client_id:
                self._swap_out(arch)

    @contextlib.contextmanager
    def use_group(self, client_ids: Sequence[int], adapter: str = "default") -> Iterator[tuple[Any, list[str]]]:
        """Context manager for training several clients of one architecture in one pass (client batching,
        :mod:`drake_bench.models.grouped`): ``(peft model, slot names)``, client i's ``adapter`` tensors copied into
        slot i (an extra peft adapter of the same config, added on first use) and every one of those slots
        trainable; their tensors are saved back to the clients on exit and the model is left on its first adapter.
        Single-rank architectures only (a rank-heterogeneous one mixes slot shapes)."""
        clients = [self._check(int(c)) for c in client_ids]
        if not clients or len(set(clients)) != len(clients):
            raise DrakeBenchError(f"use_group needs distinct clients, got {list(client_ids)}")
        self._check_adapter(adapter, clients[0])
        keys = {self.architecture(c) for c in clients}
        if len(keys) != 1:
            raise DrakeBenchError(
                f"use_group: clients {clients} span architectures {sorted(keys)}; a group shares one base"
            )
        arch = self._arch(keys.pop())
        if arch.multi_rank:
            raise DrakeBenchError(
                f"use_group: {arch.key} has clients of several LoRA ranks; client batching needs "
                "one rank per architecture"
            )
        self._swap_out(arch)
        own = arch.slots[(adapter, self._rank[clients[0]])]
        slots = [f"{own}__group{i}" for i in range(len(clients))]
        model = arch.model
        for s in slots:
            if s not in arch.live:
                from peft.utils import get_peft_model_state_dict

                with torch.random.fork_rng(devices=[]):  # its initial values are overwritten: draw no numbers
                    model.add_adapter(s, copy.deepcopy(model.peft_config[own]))
                arch.live[s] = get_peft_model_state_dict(model, adapter_name=s, save_embedding_layers=False)
        with torch.no_grad():
            for c, s in zip(clients, slots):
                state = self._get(c, adapter)
                for k, t in arch.live[s].items():
                    t.copy_(state[k])
        model.base_model.set_adapter(slots)  # trainable: exactly the group's slots
        try:
            yield model, slots
        finally:
            for c, s in zip(clients, slots):
                self._put(c, adapter, {k: v.detach().to("cpu", copy=True) for k, v in arch.live[s].items()})
            model.set_adapter(self.adapter_names[0])

    def sync(self) -> None:
        """Save every swapped-in client's adapters back to its own storage."""
        for arch in self._archs.values():
            self._swap_out(arch)

    # ------------------------------------------------------------------ state
    def get_state(self, client_id: int, adapter: str = "default") -> dict[str, torch.Tensor]:
        """A CPU copy of the client's adapter tensors (keys as ``get_peft_model_state_dict``)."""
        self._check_adapter(adapter, self._check(client_id))
        arch = self._arch(self.architecture(client_id))
        slot = arch.slots[(adapter, self._rank[client_id])]
        src = arch.live[slot] if arch.active == client_id else self._get(client_id, adapter)
        return {k: v.detach().to("cpu", copy=True) for k, v in src.items()}

    def set_state(self, client_id: int, state: Mapping[str, torch.Tensor], adapter: str = "default") -> None:
        """Replace the client's adapter tensors (all keys, matching shapes)."""
        self._check_adapter(adapter, self._check(client_id))
        arch = self._arch(self.architecture(client_id))
        slot = arch.slots[(adapter, self._rank[client_id])]
        ref = arch.init[slot]
        missing, extra = set(ref) - set(state), set(state) - set(ref)
        if missing or extra:
            raise DrakeBenchError(
                f"set_state for client {client_id} adapter {adapter!r}: missing keys {sorted(missing)[:3]}, "
                f"unexpected keys {sorted(extra)[:3]}"
            )
        for k, v in state.items():
            if tuple(v.shape) != tuple(ref[k].shape):
                raise DrakeBenchError(
                    f"set_state for client {client_id} adapter {adapter!r}: {k} has shape "
                    f"{tuple(v.shape)}, expected {tuple(ref[k].shape)}"
                )
        if arch.active == client_id:
            with torch.no_grad():
                for k, t in arch.live[slot].items():
                    t.copy_(state[k])
        else:
            self._put(
                client_id, adapter, {k: v.detach().to("cpu", dtype=ref[k].dtype, copy=True) for k, v in state.items()}
            )

    def initial_state(self, client_id: int, adapter: str = "default") -> dict[str, torch.Tensor]:
        """The adapter initialisation shared by the client's architecture and rank (a copy)."""
        self._check_adapter(adapter, self._check(client_id))
        arch = self._arch(self.architecture(client_id))
        return {k: v.clone() for k, v in arch.init[arch.slots[(adapter, self._rank[client_id])]].items()}

    def trainable_parameters(self, client_id: int) -> list[torch.nn.Parameter]:
        """Trainable parameters of the client's model (swaps the client in; active adapter only)."""
        model = self.model_for(client_id)
        return [p for p in model.parameters() if p.requires_grad]

    # ------------------------------------------------------------------ accounting
    def memory_report(self) -> dict[str, int]:
        """Bytes held: frozen bases, live adapter slots, and per-client adapter tensors in memory.

        Counted from the tensors' storages (shared storage counted once), so the numbers
        measure what the pool really holds, not what it intends to.
        """
        base: list[torch.Tensor] = []
        live: list[torch.Tensor] = []
        for arch in self._archs.values():
            live_ptrs = {t.data_ptr() for a in arch.live.values() for t in a.values()}
            base += [p for p in arch.model.parameters() if p.data_ptr() not in live_ptrs]
            base += list(arch.model.buffers())
            live += [t for a in arch.live.values() for t in a.values()]
            live += [t for a in arch.init.values() for t in a.values()]
        clients = [t for st in self._states.values() for t in st.values()]
        out = {
            "base_bytes": _tensor_bytes(base),
            "live_adapter_bytes": _tensor_bytes(live),
            "client_adapter_bytes": _tensor_bytes(clients),
        }
        out["total_bytes"] = sum(out.values())
        return out
