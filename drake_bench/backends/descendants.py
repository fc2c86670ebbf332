"""No process a method starts outlives the call that started it.

A plugin that leaves a process behind can act after the evaluator has moved on: one that detached a child (double
fork, ``setsid``) had it rewrite ``result.json`` once the evaluator had written it, and ``check`` accepted the file.
So the method's worker makes itself a *child subreaper* (Linux ``PR_SET_CHILD_SUBREAPER``): every process that its
calls start, detached or not, stays its descendant, because an orphan is re-parented to the nearest subreaper
instead of to init. After each call the worker ends all of them (:func:`end_descendants`), before it answers.

A method may still use processes inside a call (a pool for its own work); they end with the call. Elsewhere than
Linux there is neither a subreaper nor ``/proc``, and nothing here acts (documented in docs/writing-a-method.md).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Make this process the subreaper of everything it starts; False where the OS has no such thing."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def _children(pid: int) -> list[int]:
    """Direct children of ``pid`` from ``/proc/<pid>/task/*/children``; [] where /proc has no such file."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(p) for p in (task / "children").read_text().split()]
        except OSError:  # the task ended meanwhile, or no /proc
            continue
    return found


def descendants(pid: int | None = None) -> list[int]:
    """Every live descendant of ``pid`` (default: this process), parents before their children."""
    pending, seen = _children(os.getpid() if pid is None else pid), []
    while pending:
        child = pending.pop(0)
        if child not in seen:
            seen.append(child)
            pending += _children(child)
    return seen


def _reap() -> None:
    """Collect the exit status of every ended child (killed orphans re-parented here are children now)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def end_descendants(timeout: float = 5.0) -> list[int]:
    """SIGKILL every descendant of this process and reap it; returns the pids ended. Repeats until none is left
    (a process that forks while it is being ended leaves children, which come to this subreaper) or ``timeout``."""
    ended: list[int] = []
    deadline = time.monotonic() + timeout
    while True:
        alive = descendants()
        if not alive:
            break
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
                ended.append(pid)
            except ProcessLookupError:
                pass
        _reap()
        if time.monotonic() > deadline:
            break
        time.sleep(0.01)
    _reap()
    return ended
