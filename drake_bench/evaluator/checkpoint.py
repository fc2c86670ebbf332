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
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from drake_bench.core.json_files import read_json
from drake_bench.core.write_failure import once_there_is_space, write_failure
from drake_bench.errors import CheckpointError, DrakeBenchError, JSONFileError
from drake_bench.plugins.protocol import Message, State

PROGRESS = "progress.json"
PROGRESS_MAX_BYTES = 1 << 30
"""``progress.json`` holds every raw record of the seed so far, one object each (4x a result file's layout): its
limit is far above any run's, only there to refuse a file that is not a checkpoint at all before reading it whole."""


@dataclass
class RunProgress:
    completed_rounds: int = 0
    clients: dict[int, State] = field(default_factory=dict)
    server: State | None = None
    messages: dict[int, Message | None] = field(default_factory=dict)
    records: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)


def save(run_dir: Path, progress: RunProgress) -> None:
    """Write the checkpoint of ``progress.completed_rounds`` rounds; the one before it stays the checkpoint until
    ``progress.json`` is replaced. A write that fails (a full disk, above all) is one :class:`CheckpointError` naming
    the file, not a stack: the checkpoint before it and the result files stay, and the run resumes from them."""
    name = f"round-{progress.completed_rounds:04d}"
    tmp = run_dir / (name + ".tmp")
    writing = tmp
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        if tmp.exists():
            shutil.rmtree(tmp)
        for c, st in progress.clients.items():
            writing = tmp / f"client-{c}.safetensors"
            st.save(writing)
        if progress.server is not None:
            writing = tmp / "server.safetensors"
            progress.server.save(writing)
        for c, msg in progress.messages.items():
            if msg is not None:
                writing = tmp / f"message-{c}.safetensors"
                State(tensors=msg.tensors, metadata=msg.metadata).save(writing)
        writing = tmp
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
        tmp_json = writing = run_dir / (PROGRESS + ".tmp")
        tmp_json.write_text(json.dumps(doc, sort_keys=True))
        writing = run_dir / PROGRESS
        tmp_json.replace(writing)  # the commit point
    except Exception as exc:
        why = write_failure(exc)
        if why is None:
            raise
        raise CheckpointError(
            f"cannot write the checkpoint of round {progress.completed_rounds} in {run_dir}: {writing}: {why}; the "
            "checkpoint before it and the result files written so far stay, and running the same command again "
            f"resumes from them{once_there_is_space(exc)}"
        ) from None
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
        raise _broken(
            run_dir, f"{what} {path} cannot be read ({type(exc).__name__}: {' '.join(str(exc).split())[:200]})"
        ) from None


def load(run_dir: Path) -> RunProgress | None:
    """The last finished round's progress, or None when the folder holds no checkpoint."""
    path = run_dir / PROGRESS
    if not path.is_file():
        return None
    try:
        # drake_bench wrote it (json.dumps, which writes NaN for a NaN a method reported): NaN reads back
        doc = read_json(path, what="checkpoint record", max_bytes=PROGRESS_MAX_BYTES, allow_nan=True)
    except JSONFileError as exc:
        raise _broken(run_dir, f"{exc}; it was cut short or edited") from None
    shape = {"completed_rounds": int, "round_dir": str, "clients": list, "messages": list, "records": dict}
    wrong = [k for k, t in shape.items() if not isinstance(doc.get(k) if isinstance(doc, dict) else None, t)]
    if not wrong:
        wrong = [k for k in ("clients", "messages") if not all(type(c) is int for c in doc[k])]
    if wrong:
        raise _broken(run_dir, f"{path} lacks or has malformed fields {wrong}")
    if not re.fullmatch(r"round-\d+", doc["round_dir"]):  # a folder beside progress.json, never a path elsewhere
        raise _broken(run_dir, f"{path} names the round folder {doc['round_dir']!r}, not a round-NNNN folder beside it")
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
