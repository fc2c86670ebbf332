"""Per-round checkpoints of a run: every client state, the server state, the pending messages
and the raw records so far. Written after every round, atomically, so a run killed at any
point resumes from the last finished round and ends with identical results.

A checkpoint that cannot be read (``progress.json`` truncated, a round folder or a state file missing or
corrupt) raises :class:`~drake_bench.errors.CheckpointError` naming the file, with the way out: start the run
over with ``--no-resume`` (``resume=False`` in Python), or delete the folder.

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

from .errors import CheckpointError, DrakeBenchError
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


def _broken(run_dir: Path, problem: str) -> CheckpointError:
    return CheckpointError(
        f"cannot resume from the checkpoint in {run_dir}: {problem}. Start this run over with `--no-resume` "
        f"(resume=False in Python), which ignores and replaces the checkpoint, or delete {run_dir}"
    )


def _state(run_dir: Path, path: Path, what: str) -> State:
    if not path.is_file():
        raise _broken(run_dir, f"{what} {path} is missing")
    try:
        return State.load(path)
    except DrakeBenchError:
        raise
    except Exception as exc:  # safetensors' own errors, truncated headers, bad JSON metadata
        raise _broken(run_dir, f"{what} {path} cannot be read ({type(exc).__name__}: {' '.join(str(exc).split())[:200]})") from None


def load(run_dir: Path) -> RunProgress | None:
    """The last finished round's progress, or None when the folder holds no checkpoint."""
    path = run_dir / PROGRESS
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text())
    except (ValueError, OSError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise _broken(run_dir, f"{path} is not valid JSON ({exc}); it was cut short or edited") from None
    shape = {"completed_rounds": int, "round_dir": str, "clients": list, "messages": list, "records": dict}
    wrong = [k for k, t in shape.items() if not isinstance(doc.get(k) if isinstance(doc, dict) else None, t)]
    if wrong:
        raise _broken(run_dir, f"{path} lacks or has malformed fields {wrong}")
    rdir = run_dir / doc["round_dir"]
    if not rdir.is_dir():
        raise _broken(run_dir, f"the round folder {rdir} that {path} names is missing")
    clients = {int(c): _state(run_dir, rdir / f"client-{c}.safetensors", f"client {c}'s state") for c in doc["clients"]}
    server_path = rdir / "server.safetensors"
    server = _state(run_dir, server_path, "the server state") if server_path.is_file() else None
    messages: dict[int, Message | None] = {int(c): None for c in doc["clients"]}
    for c in doc["messages"]:
        st = _state(run_dir, rdir / f"message-{c}.safetensors", f"the pending message to client {c}")
        messages[int(c)] = Message(tensors=st.tensors, metadata=st.metadata)
    return RunProgress(doc["completed_rounds"], clients, server, messages, doc["records"], doc.get("extra", {}))
