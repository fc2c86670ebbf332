"""The server's component-wise FedAvg (paper §3.1, the reference code's server), keyed by component and tensor name.

Every uploaded tensor is named ``<component>/<peft key>`` (``exp-image-yes_no/base_model...q_proj.lora_A.weight``).
For each such name, the server averages the uploads of the clients that hold it, weighted by their sample counts
n_i, into the server's value; a name nobody uploads this round keeps its previous value (as in the reference code's
server: parts of the model can go many rounds without an update).

**Across architectures.** The paper's clients share one backbone and differ only in which components they hold,
so a component means the same on every client. drake_bench's clients may run different base models. A tensor is
averaged over every client that uploads it *with the same name and shape* (``share_across_architectures``), and
two tensors of different shapes are never averaged together: the group of an upload is its name plus its shape
(:func:`group_of`). With ``share_across_architectures=False`` the group is its name plus its architecture. On the
tiny zoo every size and family has its own widths, so both rules form the same groups there.

The server's state holds one tensor per group: ``<label>|<component>/<peft key>``, the label being the shape
(``8x64``) or the architecture. It also records, per client, the components that client has uploaded
(``owners``), which is what the server sends back to it: the paper's server sends each client "the decoders and
LoRA parameters that are relevant to it".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import torch

SEP = "|"


def shape_label(shape: Iterable[int]) -> str:
    return "x".join(str(int(d)) for d in shape) or "scalar"


def group_of(name: str, tensor_shape: Iterable[int], architecture: str, across: bool) -> str:
    """The server key an uploaded tensor is averaged under: its name with its shape (across architectures) or with
    its architecture."""
    label = shape_label(tensor_shape) if across else architecture
    if SEP in label or SEP in name:
        raise ValueError(f"{SEP!r} in {label!r} or {name!r}: cannot key the server's state")
    return f"{label}{SEP}{name}"


def component_of(name: str) -> str:
    """``exp-image-yes_no/base_model...`` -> ``exp-image-yes_no``."""
    comp, sep, _ = name.partition("/")
    if not sep:
        raise ValueError(f"an uploaded tensor must be named '<component>/<key>', got {name!r}")
    return comp


def weighted_mean(tensors: list[torch.Tensor], weights: list[float]) -> torch.Tensor:
    """sum_i w_i t_i / sum_i w_i in float64, returned in the first tensor's dtype; equal weights when all are 0."""
    w = torch.tensor(weights, dtype=torch.float64)
    if float(w.sum()) <= 0:
        w = torch.ones_like(w)
    w = w / w.sum()
    out = sum(float(wi) * t.double() for wi, t in zip(w, tensors))
    return out.to(tensors[0].dtype)  # type: ignore[union-attr]


def aggregate(
    uploads: Mapping[int, tuple[float, Mapping[str, torch.Tensor]]],
    architectures: Mapping[int, str],
    previous: Mapping[str, torch.Tensor],
    across: bool,
) -> tuple[dict[str, torch.Tensor], dict[str, list[int]]]:
    """Component-wise FedAvg. ``uploads``: client -> (n_i, {name: tensor}). Returns the server's new tensors (the
    previous ones with every uploaded group replaced by its weighted mean) and, per averaged group, its clients."""
    groups: dict[str, list[tuple[int, torch.Tensor]]] = {}
    for client in sorted(uploads):
        _, tensors = uploads[client]
        for name, t in tensors.items():
            component_of(name)
            groups.setdefault(group_of(name, t.shape, architectures[client], across), []).append((client, t))
    out = dict(previous)
    members: dict[str, list[int]] = {}
    for key, rows in groups.items():
        out[key] = weighted_mean([t for _, t in rows], [float(uploads[c][0]) for c, _ in rows])
        members[key] = [c for c, _ in rows]
    return out, members


def view_for(
    server: Mapping[str, torch.Tensor],
    owned: Iterable[str],
    shapes: Mapping[str, Mapping[str, tuple[int, ...]]],
    architecture: str,
    across: bool,
) -> dict[str, torch.Tensor]:
    """What the server sends one client: its value of every tensor of every component the client owns, found in the
    client's group (by the client's own tensor shapes ``shapes[component][peft key]``). Tensors the server has no
    value for are left out."""
    out: dict[str, torch.Tensor] = {}
    for comp in owned:
        for key, shape in shapes[comp].items():
            name = f"{comp}/{key}"
            value = server.get(group_of(name, shape, architecture, across))
            if value is not None:
                out[name] = value
    return out
