"""Per-round checkpoints of a run: every client state, the server state, the pending messages
and the raw records so far. Written after every round, atomically, so a run killed at any
point resumes from the last finished round and ends with identical results.

Layout (one folder per seed)::

    <run_dir>/progress.json            # {"completed_rounds": r, "round_dir": "round-0003", records...}
    <run_dir>/round-0003/client-1.safetensors, server.safetensors, message-1.safetensors, ...
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .protocol import Message, State

PROGRESS = "progress.json"


@dataclass
class RunProgress:
    completed_rounds: int = 0
    clients: dict[int, State] = field(default_factory=dict)
    server: State | None = None
    messages: dict[int, Message | None] = field(default_factory=dict)
    records: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


def save(run_dir: Path, progress: RunProgress) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    name = f"round-{progress.completed_rounds:04d}"
    tmp = run_dir / (name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    for c, st in progress.clients.items():
        st.save(tmp / f"client-{c}.safetensors")
    if progress.server is not None:
        progress.server.save(tmp / "server.safetensors")
    for c, msg in progress.messages.items():
        if msg is not None:
            State(tensors=msg.tensors, metadata=msg.metadata).save(tmp / f"message-{c}.safetensors")
    tmp.mkdir(parents=True, exist_ok=True)
    final = run_dir / name
    if final.exists():
        shutil.rmtree(final)
    tmp.rename(final)
    doc = {
        "completed_rounds": progress.completed_rounds,
        "round_dir": name,
        "clients": sorted(progress.clients),
        "messages": sorted(c for c, m in progress.messages.items() if m is not None),
        "records": progress.records,
        "extra": progress.extra,
    }
    tmp_json = run_dir / (PROGRESS + ".tmp")
    tmp_json.write_text(json.dumps(doc, sort_keys=True))
    tmp_json.replace(run_dir / PROGRESS)  # the commit point
    for old in run_dir.glob("round-*"):
        if old.name != name:
            shutil.rmtree(old, ignore_errors=True)


def load(run_dir: Path) -> RunProgress | None:
    path = run_dir / PROGRESS
    if not path.is_file():
        return None
    doc = json.loads(path.read_text())
    rdir = run_dir / doc["round_dir"]
    clients = {int(c): State.load(rdir / f"client-{c}.safetensors") for c in doc["clients"]}
    server = State.load(rdir / "server.safetensors") if (rdir / "server.safetensors").is_file() else None
    messages: dict[int, Message | None] = {int(c): None for c in doc["clients"]}
    for c in doc["messages"]:
        st = State.load(rdir / f"message-{c}.safetensors")
        messages[int(c)] = Message(tensors=st.tensors, metadata=st.metadata)
    return RunProgress(doc["completed_rounds"], clients, server, messages, doc["records"], doc.get("extra", {}))
