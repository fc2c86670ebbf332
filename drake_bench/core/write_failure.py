"""Why writing a file failed, in words a message can end with: a full disk says so, and when to run again.

A result file, a checkpoint and a board page each turn a failed write (a full disk, above all) into one located
line instead of a stack; they say different things about what stays, and the same things about the failure itself.
"""

from __future__ import annotations

import errno

_FULL = (errno.ENOSPC, errno.EDQUOT)


def write_failure(exc: BaseException) -> str | None:
    """Why writing failed, when ``exc`` is an I/O error: an OSError, or safetensors' own error for one (its Rust
    core says ``I/O error: No space left on device (os error 28)``); None for any other error."""
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    text = " ".join(str(exc).split())
    if type(exc).__name__ == "SafetensorError" and "I/O error" in text:
        return text.split("I/O error: ", 1)[-1][:200]
    return None


def once_there_is_space(exc: BaseException) -> str:
    """``" once there is space"`` when ``exc`` is a full disk or quota, else ``""``: the end of "run it again"."""
    if isinstance(exc, OSError):
        full = exc.errno in _FULL
    else:
        full = any(f"(os error {code})" in str(exc) for code in _FULL)
    return " once there is space" if full else ""
