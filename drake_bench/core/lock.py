"""One run per output folder: a lock file naming its holder, taken over only from a dead holder.

Two runs writing into one ``--out`` would overwrite each other's checkpoints and result files
(a second run with another configuration silently replaced the first's result). The lock file
``.drake-bench.lock`` holds the holder's pid, command line, host and start time, so the refusal
can say who holds the folder. A lock whose pid is gone (a killed run) is taken over with a
warning. Processes a run starts itself (the workers of ``drake-bench run``) inherit its token
through the environment and pass.

A lock file that does not read as a holder's record (not UTF-8 or not JSON, larger than a record,
no object with an integer pid: a disk error, or a file someone else put there) is never taken over:
whether a live run holds the folder cannot be told from it, so the run stops with one error naming
the file, and deleting it (once no run writes into the folder) lets the next run in.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import uuid
import warnings
from pathlib import Path
from typing import Any

from drake_bench.core.json_files import SMALL_FILE_MAX_BYTES, read_json
from drake_bench.errors import DrakeBenchError, JSONFileError

LOCK_FILE = ".drake-bench.lock"
TOKEN_ENV = "DRAKE_BENCH_RUN_LOCK"
COMMAND_MAX_CHARS = 2000
"""The most characters of the holder's command line a lock file records (it is there for people to read)."""
LOCK_MAX_BYTES = SMALL_FILE_MAX_BYTES
"""The most bytes of a lock file (1 MiB). A record is a pid, a host, a start time, a token and a command line of at
most :data:`COMMAND_MAX_CHARS` characters: well under 64 KB even with every character escaped."""


class RunLockedError(DrakeBenchError):
    """Another live run holds the output folder."""


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists on this machine."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OverflowError:  # beyond a C pid_t: no process has it
        return False
    except PermissionError:  # pragma: no cover - alive, someone else's
        return True
    return True


class RunLock:
    """``with RunLock(out):`` holds ``out`` for this process and the processes it starts."""

    def __init__(self, out: str | Path):
        self.out = Path(out)
        self.path = self.out / LOCK_FILE
        self.token: str | None = None
        self._nested = False

    def _read(self) -> dict[str, Any] | None:
        """The holder's record, None where there is no lock file; :class:`RunLockedError` naming the file where it
        holds no record (see the module's docstring)."""
        try:
            holder = read_json(self.path, what="run lock file", max_bytes=LOCK_MAX_BYTES)
        except JSONFileError as exc:
            if exc.missing:
                return None
            raise self._unreadable(str(exc)) from None
        if not isinstance(holder, dict) or type(holder.get("pid")) is not int:
            raise self._unreadable(f"{self.path} is not a run lock record (a JSON object with an integer pid)")
        return holder

    def _unreadable(self, why: str) -> RunLockedError:
        return RunLockedError(
            f"{self.out} may be in use by another run: its lock file cannot be read ({why}), so which run holds the "
            f"folder, if any, is unknown. If no run is writing into {self.out}, delete {self.path} and run again; "
            "else wait for that run to finish, or write to another --out"
        )

    def acquire(self) -> "RunLock":
        self.out.mkdir(parents=True, exist_ok=True)
        inherited = os.environ.get(TOKEN_ENV)
        for _ in range(3):
            holder = self._read()
            if holder is not None:
                if inherited and holder.get("token") == inherited:
                    self._nested = True  # a worker of the run that holds the folder
                    return self
                pid = holder["pid"]
                same_host = holder.get("host", socket.gethostname()) == socket.gethostname()
                if pid > 0 and (not same_host or pid_alive(pid)):
                    raise RunLockedError(
                        f"{self.out} is in use by another run: pid {pid} on {holder.get('host', '?')}, started "
                        f"{holder.get('started', '?')}, command: {holder.get('command', '?')}. Wait for it to finish, "
                        f"stop it, or write to another --out (lock file: {self.path})"
                    )
                warnings.warn(
                    f"{self.path}: taking over the lock of run pid {pid} ({holder.get('command', '?')}), "
                    "which is no longer running",
                    RuntimeWarning,
                    stacklevel=2,
                )
                self.path.unlink(missing_ok=True)
            token = uuid.uuid4().hex
            record = {
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "command": _command(),
                "started": time.strftime("%Y-%m-%d %H:%M:%S"),
                "token": token,
            }
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:  # another run took it between our read and our create: look again
                continue
            with os.fdopen(fd, "w") as f:
                json.dump(record, f)
            self.token = token
            os.environ[TOKEN_ENV] = token  # processes this run starts from now on pass
            return self
        raise RunLockedError(f"{self.out}: could not take the run lock {self.path} (another run keeps taking it)")

    def release(self) -> None:
        if self._nested or self.token is None:
            return
        try:
            holder = self._read()
        except RunLockedError:  # no record of ours any more: not ours to remove
            holder = None
        if holder is not None and holder.get("token") == self.token:
            self.path.unlink(missing_ok=True)
        if os.environ.get(TOKEN_ENV) == self.token:
            del os.environ[TOKEN_ENV]
        self.token = None

    def __enter__(self) -> "RunLock":
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _command() -> str:
    """This process's command line as the lock file records it: at most :data:`COMMAND_MAX_CHARS` characters, and
    Unicode text (an argument that is no UTF-8, which Python keeps as lone surrogates, is written as its escapes), so
    the record always reads back."""
    text = (" ".join(sys.argv) or sys.executable).encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= COMMAND_MAX_CHARS else text[: COMMAND_MAX_CHARS - 3] + "..."
