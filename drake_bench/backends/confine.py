"""The method's worker cannot read the benchmark's files, the run's checkpoints or any result: a mount namespace.

Process isolation keeps the answers out of the worker's memory, but not off its disk: a plugin that opened the
cached ``test-*.parquet`` shards scored 100.00 on every metric, and the run's uid secret lay in ``progress.json``
beside the method's own work folder. So before the plugin is imported, the worker enters a user and mount
namespace of its own (unprivileged on Linux) and mounts an empty, read-only tmpfs over every folder that holds
what it must not see (:class:`Confinement`): the built data (shards, the decoded Arrow cache, the verified-file
record), downloaded revisions, the run's output folder (checkpoints, results, the secret). The method's work folder,
inside the output folder, is bound back, read-write. Only the worker's view changes: the evaluator, in its own
namespace, reads and writes as before. Writing a result file is impossible from the worker too (the tmpfs is
read-only), so a plugin cannot forge what the evaluator writes.

Where the kernel refuses unprivileged namespaces (some containers, non-Linux), :func:`confine` raises
:class:`ConfinementUnavailable` with the reason and the run records ``sandbox: none``; boards that require the
sandbox refuse such files by rule. What the mask cannot know is hidden only if named: raw sources a real benchmark
was built from (``--source-dir``) lie wherever the user keeps them.
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_MOVE, MS_REC, MS_PRIVATE = (
    1,
    2,
    4,
    32,
    4096,
    8192,
    16384,
    1 << 18,
)

SANDBOX = "namespaces"
"""What a confined run records as its sandbox (``fl.extra.sandbox``); an unconfined one records ``none (why)``."""
SANDBOX_KEY = "sandbox"
"""``fl.extra`` key of what the method's worker could not see (:data:`SANDBOX`, or ``"none (why)"``): an execution
field (it says how a run executed, not what it computed)."""


class ConfinementUnavailable(OSError):
    """The kernel would not give this process a namespace of its own (the reason is the message)."""


@dataclass(frozen=True)
class Confinement:
    """What a worker must not see (``hidden``: folders masked by an empty read-only tmpfs) and the folders inside
    them it works in (``kept``: bound back read-write, created if missing)."""

    hidden: tuple[str, ...] = ()
    kept: tuple[str, ...] = field(default=())

    def masks(self) -> list[str]:
        """The existing hidden folders, outermost only (a folder inside a masked one is masked with it)."""
        folders = sorted({str(Path(h).resolve()) for h in self.hidden if Path(h).is_dir()}, key=len)
        out: list[str] = []
        for f in folders:
            if not any(_within(f, o) for o in out):
                out.append(f)
        return out


def _within(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder`` or lies below it (both resolved)."""
    return path == folder or path.startswith(folder + os.sep)


def dataset_caches() -> list[Path]:
    """The Hugging Face caches that may hold a benchmark's files: each dataset repo of the Hub cache (a downloaded
    revision's shards; model repos stay visible, methods load checkpoints from them) and the datasets cache."""
    from huggingface_hub import constants

    hub = Path(constants.HF_HUB_CACHE)
    found = sorted(hub.glob("datasets--*")) if hub.is_dir() else []
    datasets_cache = Path(os.environ.get("HF_DATASETS_CACHE", Path(constants.HF_HOME) / "datasets"))
    return found + ([datasets_cache] if datasets_cache.is_dir() else [])


def _import_folders() -> list[str]:
    """Where this process imports code from (the interpreter's prefixes and every folder on ``sys.path``)."""
    folders = {sys.prefix, sys.base_prefix, *(p for p in sys.path if p and os.path.isdir(p))}
    return sorted(str(Path(f).resolve()) for f in folders)


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise ConfinementUnavailable(code, f"{what}: {os.strerror(code)}")


def _mount(
    libc: ctypes.CDLL, source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None
) -> None:
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    _check(libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)), f"mount {target}")


def confine(confinement: Confinement) -> str:
    """Enter a user + mount namespace and mask ``confinement``'s folders; returns :data:`SANDBOX`.

    Must run while the process has one thread (the kernel refuses a multi-threaded caller), so before any thread
    starts. Raises :class:`ConfinementUnavailable` where the kernel refuses; a refusal after the namespace was
    entered leaves the process as confined as it got, and the run still records ``sandbox: none``."""
    if not sys.platform.startswith("linux"):
        raise ConfinementUnavailable(errno.ENOSYS, "mount namespaces exist on Linux only")
    masks = confinement.masks()
    code = _import_folders()
    for mask in masks:  # e.g. --out ~ with a venv in the home folder: masking it would hide the worker's own code
        inside = next((n for n in code if _within(n, mask)), None)
        if inside is not None:
            raise ConfinementUnavailable(
                errno.EINVAL,
                f"{mask} holds {inside}, which the method's worker imports from; write the run's output elsewhere",
            )
    kept = [str(Path(k).resolve()) for k in confinement.kept]
    kept = [k for k in kept if any(_within(k, m) for m in masks)]  # the others stay visible anyway
    for k in kept:
        Path(k).mkdir(parents=True, exist_ok=True)
    # each kept folder is bound to a staging point outside every mask, then moved back once the masks are on
    staging = [tempfile.mkdtemp(prefix="drake-bench-kept-") for _ in kept]
    uid, gid = os.getuid(), os.getgid()
    libc = _libc()
    try:
        _check(libc.unshare(CLONE_NEWUSER | CLONE_NEWNS), "unshare(CLONE_NEWUSER | CLONE_NEWNS)")
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
        Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
        _mount(libc, None, "/", None, MS_REC | MS_PRIVATE)  # nothing below propagates back to the evaluator's view
        for k, stage in zip(kept, staging):
            _mount(libc, k, stage, None, MS_BIND | MS_REC)
        for mask in masks:
            _mount(libc, "tmpfs", mask, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=755")
        for k, stage in zip(kept, staging):
            Path(k).mkdir(parents=True, exist_ok=True)  # inside the (still writable) tmpfs: the mount point
            _mount(libc, stage, k, None, MS_MOVE)
        for mask in masks:  # read-only from here: nothing can be written where the evaluator will write
            _mount(libc, None, mask, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    except OSError as exc:
        raise ConfinementUnavailable(exc.errno or errno.EPERM, str(exc)) from None
    finally:
        for stage in staging:
            try:
                os.rmdir(stage)
            except OSError:  # still a mount point: the confinement failed half-way; the folder is empty anyway
                pass
    return SANDBOX
