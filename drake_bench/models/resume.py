"""Resumable training loops: periodic safetensors snapshots of modules and AdamW state (no pickle).

Building the zoo takes a long time on a laptop CPU, and an interrupted build must not start over. The
training loops of :mod:`.vision` and :mod:`.pretrain` draw their data by step index and use no random
numbers after initialisation, so a loop restored to step ``k`` (module weights, optimiser moments, step)
continues exactly as the uninterrupted loop would have: the finished weights are bit-identical.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import torch

STATE_FILE = "progress.json"
TENSORS_FILE = "progress.safetensors"
STATE_MAX_BYTES = 1 << 20
"""The most bytes of a ``progress.json`` read (1 MiB): it holds a step count and a few numbers of the loop."""


def save_progress(
    folder: Path,
    step: int,
    modules: dict[str, torch.nn.Module],
    optimizer: torch.optim.Optimizer,
    extra: dict[str, Any] | None = None,
) -> None:
    """Snapshot after ``step`` finished steps: every module's state dict and the optimiser's per-parameter state."""
    from safetensors.torch import save_file

    tensors: dict[str, torch.Tensor] = {}
    for name, module in modules.items():
        for key, value in module.state_dict().items():
            tensors[f"module/{name}/{key}"] = value.detach().contiguous().clone()
    index = _param_index(optimizer)
    for pid, state in optimizer.state.items():
        for key, value in state.items():
            tensors[f"optim/{index[id(pid)]}/{key}"] = torch.as_tensor(value).detach().contiguous().clone()
    tmp = folder.with_name(folder.name + f".tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    save_file(tensors, str(tmp / TENSORS_FILE))
    (tmp / STATE_FILE).write_text(json.dumps({"step": step, **(extra or {})}))
    if folder.exists():
        shutil.rmtree(folder)
    os.replace(tmp, folder)


def load_progress(
    folder: Path, modules: dict[str, torch.nn.Module], optimizer: torch.optim.Optimizer
) -> tuple[int, dict]:
    """Restore a snapshot into ``modules`` and ``optimizer``; returns (finished steps, extra). (0, {}) if none.

    The snapshot lies in the models cache, which anything on the machine may have written to. One that is not what
    :func:`save_progress` writes (a ``progress.json`` that is not such a JSON object, tensors that do not load or do
    not fit the modules and the optimiser) is refused with one :class:`~drake_bench.errors.CheckpointError` naming the
    folder and the way out, rather than resuming from bytes no build wrote or crashing with a library's traceback."""
    from safetensors.torch import load_file

    from drake_bench.core.json_files import read_json
    from drake_bench.errors import CheckpointError, JSONFileError

    if not (folder / STATE_FILE).is_file() or not (folder / TENSORS_FILE).is_file():
        return 0, {}

    def refuse(problem: str) -> CheckpointError:
        return CheckpointError(
            f"the training snapshot in {folder} cannot be resumed: {problem}; delete that folder to train this stage "
            "from its start"
        )

    try:
        record = read_json(folder / STATE_FILE, what="training snapshot record", max_bytes=STATE_MAX_BYTES)
    except JSONFileError as exc:
        raise refuse(str(exc)) from None
    step = record.get("step") if isinstance(record, dict) else None
    if type(step) is not int or step < 0:
        raise refuse(f"{STATE_FILE} is not a JSON object with a whole 'step' count of at least 0")
    try:
        tensors = load_file(str(folder / TENSORS_FILE))
        for name, module in modules.items():
            prefix = f"module/{name}/"
            module.load_state_dict({k[len(prefix) :]: v for k, v in tensors.items() if k.startswith(prefix)})
        params = [p for group in optimizer.param_groups for p in group["params"]]
        for key, value in tensors.items():
            if key.startswith("optim/"):
                _, idx, field = key.split("/", 2)
                param = params[int(idx)]
                if field != "step" and value.shape != param.shape:
                    raise ValueError(
                        f"optimiser state {key} has shape {tuple(value.shape)}, its parameter {tuple(param.shape)}"
                    )
                optimizer.state[param][field] = value
    except Exception as exc:  # safetensors' own error, a shape or key mismatch, an index out of range
        raise refuse(
            f"{TENSORS_FILE} does not fit this stage's model and optimiser ({type(exc).__name__}: {exc})"
        ) from None
    record = dict(record)
    record.pop("step")
    return step, record


def _param_index(optimizer: torch.optim.Optimizer) -> dict[int, int]:
    params = [p for group in optimizer.param_groups for p in group["params"]]
    return {id(p): i for i, p in enumerate(params)}
