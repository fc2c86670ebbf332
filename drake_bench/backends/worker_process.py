"""A method in its own process: the evaluator's process alone holds the benchmark data.

A plugin that shares the evaluator's process can reach every answer in memory (through private
attributes, ``gc.get_objects()``, ``copy``, pickling); no attribute name can stop that. So the
method runs in a worker process of its own. Each call sends exactly what the method may see
(that round's training items as :class:`~drake_bench.benchmarks.sample.MethodSample`, the contexts, queries
without answers, states and messages) and gets back messages, states and predictions. Everything
crosses as tensors (safetensors bytes; images as uint8 arrays) plus JSON, never pickle, so what a
method receives is data, not objects holding references to anything else.

The worker wraps the method in :class:`~drake_bench.plugins.guard.GuardedMethod`, so every call is checked
where it runs and an error comes back already naming the method, seed, client, round and call.
The evaluator seeds the worker's random generators before each call, exactly as it seeds its own
in ``inline`` mode, so both modes give the same numbers. A call can be given a time limit; a
worker that exceeds it is killed and the run stops with a located error. Workers die with their
parent: on Linux through the parent-death signal, elsewhere through a watchdog thread.

On disk, the worker confines itself before the plugin is imported (:mod:`drake_bench.backends.confine`): the benchmark's
files, the run's checkpoints and results are masked from it; and no process a call starts outlives the call
(:mod:`drake_bench.backends.descendants`).
"""

from __future__ import annotations

import json
import os
import struct
import sys
import threading
import time
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np
import torch

import drake_bench.errors as errors_mod
from drake_bench.backends.confine import Confinement, ConfinementUnavailable, confine
from drake_bench.backends.descendants import become_subreaper, end_descendants
from drake_bench.benchmarks.sample import AnswerType, MethodSample
from drake_bench.core.lock import pid_alive
from drake_bench.core.numerics import cpu_capability, environment_for
from drake_bench.errors import DrakeBenchError, PluginError
from drake_bench.plugins.guard import peak_memory_bytes, plugin_error
from drake_bench.plugins.protocol import ClientContext, FederationContext, Message, MethodMeta, ModelIdentity, State

# --------------------------------------------------------------------------- codec: JSON + safetensors
_TAG = "__db__"


class _Encoder:
    def __init__(self) -> None:
        self.tensors: dict[str, torch.Tensor] = {}
        self._names: dict[int, str] = {}
        self._held: list[torch.Tensor] = []  # keeps each seen tensor alive, so no id() is reused for another

    def _tensor(self, t: torch.Tensor) -> str:
        """One copy per tensor object (a tensor in both an upload and a state travels once)."""
        if id(t) in self._names:
            return self._names[id(t)]
        self._held.append(t)
        name = self._names[id(t)] = f"t{len(self.tensors)}"
        self.tensors[name] = t.detach().cpu().contiguous().clone()  # own storage: safetensors refuses shared memory
        return name

    def enc(self, obj: Any) -> Any:
        if obj is None or isinstance(obj, (bool, int, float, str)):
            return obj
        if isinstance(obj, torch.Tensor):
            return {_TAG: "tensor", "name": self._tensor(obj)}
        if isinstance(obj, State) or isinstance(obj, Message):
            kind = "state" if isinstance(obj, State) else "message"
            return {_TAG: kind, "tensors": self.enc(obj.tensors), "metadata": self.enc(obj.metadata)}
        if isinstance(obj, MethodSample):
            return {
                _TAG: "sample",
                "uid": obj.uid,
                "images": [self.enc(i) for i in obj.images],
                "question": obj.question,
                "choices": list(obj.choices),
                "answer": obj.answer,
                "answer_type": obj.answer_type.value,
            }
        if isinstance(obj, ClientContext):
            return {_TAG: "client_ctx", **{f.name: getattr(obj, f.name) for f in fields(obj)}}
        if isinstance(obj, FederationContext):
            data = {f.name: self.enc(getattr(obj, f.name)) for f in fields(obj) if f.name != "public_data"}
            return {_TAG: "federation_ctx", **data}
        if isinstance(obj, ModelIdentity):
            return {_TAG: "model_identity", "data": obj.model_dump(mode="json")}
        if isinstance(obj, Path):
            return {_TAG: "path", "value": str(obj)}
        if isinstance(obj, tuple):
            return {_TAG: "tuple", "items": [self.enc(x) for x in obj]}
        if isinstance(obj, list):
            return [self.enc(x) for x in obj]
        if isinstance(obj, dict):
            return {_TAG: "dict", "items": [[self.enc(k), self.enc(v)] for k, v in obj.items()]}
        if isinstance(obj, np.generic):
            return obj.item()
        try:
            from PIL import Image
        except ImportError:  # pragma: no cover
            Image = None  # type: ignore[assignment]
        if Image is not None and isinstance(obj, Image.Image):
            return {_TAG: "image", "name": self._tensor(torch.from_numpy(np.asarray(obj).copy())), "mode": obj.mode}
        raise TypeError(
            f"a {type(obj).__name__} cannot cross the process boundary (send tensors, JSON values, State, Message)"
        )


def _decode(obj: Any, tensors: dict[str, torch.Tensor], public_data: Any = None) -> Any:
    d = lambda x: _decode(x, tensors, public_data)  # noqa: E731
    if isinstance(obj, list):
        return [d(x) for x in obj]
    if not isinstance(obj, dict):
        return obj
    kind = obj.get(_TAG)
    if kind == "tensor":
        return tensors[obj["name"]]
    if kind in ("state", "message"):
        cls = State if kind == "state" else Message
        return cls(tensors=d(obj["tensors"]), metadata=d(obj["metadata"]))
    if kind == "sample":
        return MethodSample(
            uid=obj["uid"],
            images=[d(i) for i in obj["images"]],
            question=obj["question"],
            choices=obj["choices"],
            answer=obj["answer"],
            answer_type=AnswerType(obj["answer_type"]),
        )
    if kind == "client_ctx":
        return ClientContext(**{k: v for k, v in obj.items() if k != _TAG})
    if kind == "federation_ctx":
        data = {k: d(v) for k, v in obj.items() if k != _TAG}
        data["allocation"] = {int(k): v for k, v in data["allocation"].items()}
        data["architectures"] = {int(k): v for k, v in data["architectures"].items()}
        from drake_bench.benchmarks.synth.public import sampler

        # public items are no secret: the worker draws them itself, the same seeded draw as the evaluator's
        return FederationContext(public_data=public_data or sampler(data["modality"]), **data)
    if kind == "model_identity":
        return ModelIdentity(**obj["data"])
    if kind == "path":
        return Path(obj["value"])
    if kind == "tuple":
        return tuple(d(x) for x in obj["items"])
    if kind == "dict":
        return {d(k): d(v) for k, v in obj["items"]}
    if kind == "image":
        from PIL import Image

        return Image.fromarray(tensors[obj["name"]].numpy(), mode=obj["mode"])
    return {k: d(v) for k, v in obj.items()}


def dumps(obj: Any) -> bytes:
    """``obj`` as one byte string: a length-prefixed JSON header, then the tensors as safetensors."""
    from safetensors.torch import save

    enc = _Encoder()
    header = json.dumps(enc.enc(obj)).encode()
    return struct.pack("<Q", len(header)) + header + (save(enc.tensors) if enc.tensors else b"")


def loads(data: bytes, public_data: Any = None) -> Any:
    from safetensors.torch import load

    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    rest = data[8 + n :]
    return _decode(header, load(rest) if rest else {}, public_data)


# --------------------------------------------------------------------------- the worker
def die_with(watch_pid: int) -> None:
    """End this process as soon as process ``watch_pid`` is gone, even after a kill -9 (no orphan keeps training).

    When ``watch_pid`` is the direct parent (a spawned worker), Linux's parent-death signal ends this
    process at once; in every case a watchdog thread checks every half second (a forkserver's
    children have the fork server, not the evaluator, as parent).
    """
    if sys.platform.startswith("linux") and os.getppid() == watch_pid:
        try:
            import ctypes
            import signal

            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except OSError:  # pragma: no cover
            pass

    def alive() -> bool:
        return pid_alive(watch_pid)

    if not alive():
        os._exit(1)

    def watch() -> None:
        while alive():
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="die-with-parent", daemon=True).start()


def package_origin() -> str:
    """Where this process's ``drake_bench`` was imported from (its folder, resolved)."""
    return str(Path(__file__).resolve().parents[1])


def _enter_sandbox(confinement: dict[str, list[str]] | None) -> str:
    """Confine this worker before anything else runs (the kernel refuses a namespace to a process with threads):
    :data:`~drake_bench.backends.confine.SANDBOX`, or ``"none (why)"``."""
    if confinement is None:
        return "none (not asked for)"
    try:
        return confine(Confinement(hidden=tuple(confinement["hidden"]), kept=tuple(confinement["kept"])))
    except ConfinementUnavailable as exc:
        return f"none ({exc.strerror or exc})"


def _worker_main(
    conn: Any,
    parent_pid: int,
    name: str,
    target: str | None,
    config: dict,
    threads: int,
    environ: dict[str, str],
    parent_origin: str,
    confinement: dict[str, list[str]] | None,
) -> None:
    sandbox = _enter_sandbox(confinement)
    die_with(parent_pid)
    become_subreaper()  # every process a call starts stays this worker's, and ends with the call
    os.environ.clear()  # the evaluator's environment now, not the fork server's from when it started
    os.environ.update(environ)
    from drake_bench.core.progress import quiet_libraries
    from drake_bench.plugins.guard import GuardedMethod
    from drake_bench.plugins.registry import create_method, method_class, register_method

    quiet_libraries()
    torch.set_num_threads(threads)
    if package_origin() != parent_origin:  # another drake_bench would run the method: other code, other numbers
        conn.send_bytes(dumps(("error", "PluginError", mismatch_message(parent_origin, package_origin()))))
        return
    try:
        if target is not None:  # registered in the parent's process by register_method: import it here
            register_method(import_target(target), name=name)
        method_class(name)  # the imports: no time limit (seconds of torch, peft, transformers on a cold cache)
    except BaseException as exc:  # noqa: BLE001 - every failure goes back as text
        end_descendants()
        conn.send_bytes(dumps(("error", type(exc).__name__, str(exc))))
        return
    conn.send_bytes(dumps(("imported",)))
    try:
        method = create_method(name, config)  # the plugin's __init__: a plugin call, under --call-timeout
        guarded = GuardedMethod(method)
        info = {
            "meta": method.meta.model_dump(mode="json"),
            "config": method.config.model_dump(mode="json"),
            "post_federation": guarded.has_post_federation,
            "adaptation": guarded.has_adaptation,
            "diagnostics": guarded.has_diagnostics,
            "client_diagnostics": guarded.has_client_diagnostics,
            "clients_together": guarded.trains_clients_together,
            "cpu_capability": cpu_capability(),
            "sandbox": sandbox,
        }
        end_descendants()
        conn.send_bytes(dumps(("ok", info)))
    except BaseException as exc:  # noqa: BLE001 - every failure goes back as text
        end_descendants()
        conn.send_bytes(dumps(("error", type(exc).__name__, str(exc))))
        return
    while True:
        try:
            request = loads(conn.recv_bytes())
        except EOFError:
            return
        call, seed, rng_seed, args = request
        if call == "close":
            return
        guarded.seed = seed
        try:
            value = (
                getattr(guarded, call)(*args, rng_seed=rng_seed) if call in _SEEDED else getattr(guarded, call)(*args)
            )
            reply = dumps(("ok", value, peak_memory_bytes()))
        except BaseException as exc:  # noqa: BLE001
            reply = dumps(("error", type(exc).__name__, str(exc)))
        end_descendants()  # before the answer: nothing the call started acts after it
        conn.send_bytes(reply)


_SEEDED = {
    "setup",
    "init_client",
    "init_server",
    "client_update",
    "client_update_group",
    "aggregate",
    "predict",
    "post_federation",
    "adaptation_state",
}


def import_target(target: str) -> Any:
    """The object at ``"module:qualname"``."""
    import importlib

    module, _, qualname = target.partition(":")
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def registered_targets() -> dict[str, str]:
    """Import paths of the methods registered in this process by ``register_method`` that a new process can
    import (classes defined inside functions or in ``__main__`` cannot be, and are left out)."""
    from drake_bench.plugins.registry import registered_in_process

    return {
        name: f"{cls.__module__}:{cls.__qualname__}"
        for name, cls in registered_in_process().items()
        if "<locals>" not in cls.__qualname__ and cls.__module__ != "__main__"
    }


class hidden_main:  # noqa: N801 - a context manager used like a function
    """Hide the main script from the processes started inside this block (method workers, the forkserver, the
    runner's workers): multiprocessing would run it again in each of them to rebuild ``__main__``, which a user's
    script without an ``if __name__ == "__main__":`` guard (the README's examples pasted into a file) turns into
    a second run inside the worker, and a script read from stdin (``python - <<EOF``) cannot be re-read at all.
    The workers never need it: methods reach them by import path (a method defined in ``__main__`` is refused)."""

    def __enter__(self) -> None:
        self.main = sys.modules.get("__main__")
        self.saved: dict[str, Any] = {}
        for attr in ("__file__", "__spec__"):  # what multiprocessing.spawn.get_preparation_data reads
            if getattr(self.main, attr, None) is not None:
                self.saved[attr] = getattr(self.main, attr)
                if attr == "__file__":
                    delattr(self.main, attr)
                else:
                    setattr(self.main, attr, None)

    def __exit__(self, *exc: object) -> None:
        for attr, value in self.saved.items():
            setattr(self.main, attr, value)


def mismatch_message(parent: str, worker: str) -> str:
    return (
        f"the method's worker process imported drake_bench from {worker}, but the evaluator runs the one in "
        f"{parent}: the worker must run the same code. A folder named drake_bench in the current directory or "
        "early on PYTHONPATH shadows the installed package; run from another folder, or install that folder "
        "(`pip install -e .`) so both are the same"
    )


def import_path() -> list[str]:
    """This process's ``sys.path`` as another process must see it: ``''`` (the folder Python started in) made
    absolute, as multiprocessing's spawn does."""
    from multiprocessing.process import ORIGINAL_DIR

    return [os.path.abspath(ORIGINAL_DIR) if entry == "" else str(entry) for entry in sys.path]


class same_import_path:  # noqa: N801 - a context manager used like a function
    """Start the fork server that forks the method workers with this process's ``sys.path``.

    Python 3.11's fork server ignores the ``sys.path`` it is handed (CPython gh-117378; fixed from 3.12.8 and
    3.13.1) and starts as ``python -c``, which puts the current folder first. In a clone of this repository that
    folder holds the source ``drake_bench/``, which shadows the installed package: its ``methods/``, ``loaders/``
    and ``splits/`` only become ``drake_bench.*`` when installed, so every method failed to import in its worker.
    The server therefore starts with ``PYTHONSAFEPATH=1`` (no current folder) and ``PYTHONPATH`` set to this
    process's path (the workaround CPython's maintainers give); both are this block's only, and a worker puts the
    evaluator's own environment back before anything else (:func:`_worker_main`), so a method never sees them."""

    _KEYS = ("PYTHONPATH", "PYTHONSAFEPATH")

    def __enter__(self) -> None:
        self.saved = {key: os.environ.get(key) for key in self._KEYS}
        os.environ["PYTHONPATH"] = os.pathsep.join(import_path())
        os.environ["PYTHONSAFEPATH"] = "1"

    def __exit__(self, *exc: object) -> None:
        for key, value in self.saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


FORKSERVER_PRELOAD = [
    "drake_bench.backends.worker_process",
    "drake_bench.plugins.guard",
    "drake_bench.plugins.registry",
]
"""What the forkserver imports before it forks any method worker."""
MODEL_PRELOAD = [
    "peft",
    "drake_bench.models.pool",
    "drake_bench.models.engine",
    "drake_bench.models.loading",
    "transformers.models.llava.modeling_llava",
    "transformers.models.llama.modeling_llama",
    "transformers.models.qwen2.modeling_qwen2",
]
"""What a method that trains the zoo's models imports on setup (peft, the model classes: seconds of imports),
imported once in the forkserver too when the run's benchmark allocates models, so each worker forked from it
starts with them; a run on a benchmark without models does not wait for them. A module that fails to import is
skipped by multiprocessing (the worker imports it itself, or reports why not)."""


def _start_method(models: bool = True) -> Any:
    """forkserver where there is one (workers start in milliseconds after the first), spawn elsewhere. ``models``:
    the forkserver, if this starts it, also preloads :data:`MODEL_PRELOAD` (a running one keeps what it has)."""
    import multiprocessing as mp

    if "forkserver" in mp.get_all_start_methods():
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(FORKSERVER_PRELOAD + (MODEL_PRELOAD if models else []))
        return ctx
    return mp.get_context("spawn")


def warm_forkserver(models: bool = True) -> None:
    """Start the forkserver now and return at once: it imports its preload while this process reads its
    benchmark, so the first method worker does not wait for those imports. Nothing where there is none."""
    ctx = _start_method(models)
    if ctx.get_start_method() == "forkserver":
        from multiprocessing import forkserver

        with hidden_main(), same_import_path():
            forkserver.ensure_running()


class MethodProcess:
    """The evaluator's handle on a method running in a worker process: a
    :class:`~drake_bench.plugins.handle.MethodHandle`, as :class:`~drake_bench.plugins.guard.GuardedMethod` is, whose
    calls are guarded in the worker and carried across the pipe."""

    # what the worker reports when it has loaded the method (MethodHandle's identity members)
    name: str
    seed: int | None
    meta: MethodMeta
    config_dump: dict[str, Any]
    has_post_federation: bool
    has_adaptation: bool
    has_diagnostics: bool
    has_client_diagnostics: bool
    trains_clients_together: bool

    def __init__(
        self,
        name: str,
        config: dict[str, Any],
        seed: int | None = None,
        call_timeout: float | None = None,
        threads: int | None = None,
        numerics: str = "native",
        confinement: Confinement | None = None,
    ):
        from drake_bench.plugins.registry import registered_in_process

        ctx = _start_method()
        self.name, self.seed, self.call_timeout = name, seed, call_timeout
        self._peak = 0
        self._conn, child = ctx.Pipe(duplex=True)
        cls = registered_in_process().get(name)
        target = None
        if cls is not None:
            if "<locals>" in cls.__qualname__ or cls.__module__ == "__main__":
                raise PluginError(
                    f"method {name!r} ({cls.__module__}.{cls.__qualname__}) was registered in this process but cannot "
                    "be imported by a worker process: define it at module level in an importable module (or register "
                    "it through an entry point), or run with isolation='inline'"
                )
            target = f"{cls.__module__}:{cls.__qualname__}"
        environ = environment_for(numerics)  # read before same_import_path() changes this process's environment
        self._proc = ctx.Process(
            target=_worker_main,
            args=(
                child,
                os.getpid(),
                name,
                target,
                config,
                threads or torch.get_num_threads(),
                environ,
                package_origin(),
                _confinement_args(confinement),
            ),
            daemon=True,
        )
        with hidden_main(), same_import_path():
            self._proc.start()
        child.close()
        status, *rest = self._receive("start-up", None, None)
        if status == "imported":  # the plugin's own code runs from here on: its __init__ is under the call limit
            status, *rest = self._receive("__init__", None, None)
        if status != "ok":
            self.close()
            self._raise(rest[0], rest[1], "start-up", None, None)
        info = rest[0]
        self.meta = MethodMeta(**info["meta"])
        self.config_dump = info["config"]
        self.has_post_federation = info["post_federation"]
        self.has_adaptation = info["adaptation"]
        self.has_diagnostics = info["diagnostics"]
        self.has_client_diagnostics = info["client_diagnostics"]
        self.trains_clients_together = info["clients_together"]
        self.cpu_capability: str | None = info.get("cpu_capability")  # what the worker's kernels use (numerics.py)
        self.sandbox: str = info["sandbox"]  # what the worker could not see (confine.py), or "none (why)"

    # -- transport --------------------------------------------------------------------
    def _receive(self, call: str, client: int | None, round_idx: int | None) -> tuple:
        timeout = self.call_timeout if call != "start-up" else None  # the limit is for plugin calls, not imports
        if timeout is not None and not self._conn.poll(timeout):
            self.kill()
            raise self.error(
                call, f"no answer within {timeout:g} s (--call-timeout); the worker was stopped", client, round_idx
            )
        try:
            data = self._conn.recv_bytes()
        except EOFError:
            self._proc.join(5)
            code = self._proc.exitcode
            hint = (
                f"; it imports drake_bench from this process's sys.path, which gives {package_origin()}"
                if call == "start-up"
                else ""
            )
            raise self.error(call, f"its worker process died (exit code {code}){hint}", client, round_idx) from None
        try:
            reply = loads(data)
            if not isinstance(reply, (tuple, list)) or not reply or reply[0] not in ("ok", "error", "imported"):
                raise ValueError(f"a reply must be ('ok' | 'error' | 'imported', ...), got {str(reply)[:80]!r}")
            return tuple(reply)
        except Exception as exc:  # noqa: BLE001 - the method wrote on the evaluator's pipe itself
            self.kill()
            raise self.error(
                call,
                f"its worker sent {len(data)} bytes that are not a reply of drake_bench's worker "
                f"({type(exc).__name__}: {str(exc)[:200]}); the worker was stopped",
                client,
                round_idx,
            ) from None

    def _raise(self, kind: str, text: str, call: str, client: int | None, round_idx: int | None) -> None:
        """Re-raise a worker's error here: drake_bench's own by class, anything else as a located PluginError."""
        cls = getattr(errors_mod, kind, None)
        if isinstance(cls, type) and issubclass(cls, DrakeBenchError):
            raise rebuild_error(cls, text)
        raise self.error(call, f"{kind}: {text}", client, round_idx)

    def _call(
        self,
        call: str,
        *args: Any,
        rng_seed: int | None = None,
        client: int | None = None,
        round_idx: int | None = None,
    ) -> Any:
        try:
            payload = dumps((call, self.seed, rng_seed, list(args)))
        except TypeError as exc:  # a state or message this side cannot send (it came back from the method)
            raise self.error(call, str(exc), client, round_idx) from None
        try:
            self._conn.send_bytes(payload)
        except OSError:  # BrokenPipeError and kin: the worker is gone (killed, or it ended itself)
            self._proc.join(5)
            raise self.error(
                call, f"its worker process died before the call (exit code {self._proc.exitcode})", client, round_idx
            ) from None
        status, *rest = self._receive(call, client, round_idx)
        if status != "ok":
            self._raise(rest[0], rest[1], call, client, round_idx)
        self._peak = max(self._peak, rest[1])
        return rest[0]

    def peak_memory_bytes(self) -> int:
        """The worker's peak memory so far (where the method's models live)."""
        return self._peak

    def count_flops(self, on: bool) -> None:
        """Count FLOPs of the calls from here on, in the worker (see GuardedMethod.count_flops)."""
        self._call("count_flops", on)

    def counted_flops(self) -> dict[str, int]:
        return self._call("counted_flops")

    # -- the guarded protocol, across the boundary ---------------------------------------
    def model_identity(self, model_name: str) -> ModelIdentity:
        return self._call("model_identity", model_name)

    def evaluation_settings(self) -> dict[str, Any]:
        return self._call("evaluation_settings")

    def error(self, call: str, problem: str, client: int | None = None, round_idx: int | None = None) -> PluginError:
        return plugin_error(self.name, call, problem, self.seed, client, round_idx)

    def setup(self, federation: FederationContext, rng_seed: int | None = None) -> None:
        self._call("setup", federation, rng_seed=rng_seed)

    def init_client(self, ctx: ClientContext, rng_seed: int | None = None) -> State:
        return self._call("init_client", ctx, rng_seed=rng_seed, client=ctx.client_id)

    def init_server(self, rng_seed: int | None = None) -> State:
        return self._call("init_server", rng_seed=rng_seed)

    def client_update(
        self,
        ctx: ClientContext,
        state: State,
        message: Message | None,
        batches: Any,
        call: str = "client_update",
        rng_seed: int | None = None,
    ) -> tuple[Message, State]:
        batches = [list(b) for b in batches]  # decoded here, in the evaluator's process: data errors stay data errors
        return self._call(
            "client_update",
            ctx,
            state,
            message,
            batches,
            call,
            rng_seed=rng_seed,
            client=ctx.client_id,
            round_idx=ctx.round_idx,
        )

    def client_update_group(
        self,
        ctxs: list[ClientContext],
        states: list[State],
        messages: list[Message | None],
        batches: list[Any],
        rng_seed: int | None = None,
    ) -> list[tuple[Message, State]]:
        batches = [[list(b) for b in bs] for bs in batches]  # decoded here, as client_update's
        return self._call(
            "client_update_group", ctxs, states, messages, batches, rng_seed=rng_seed, round_idx=ctxs[0].round_idx
        )

    def aggregate(
        self, round_idx: int, server_state: State, uploads: dict[int, Message], rng_seed: int | None = None
    ) -> tuple[dict[int, Message], State]:
        return self._call("aggregate", round_idx, server_state, uploads, rng_seed=rng_seed, round_idx=round_idx)

    def round_diagnostics(self, round_idx: int) -> list[dict[str, Any]]:
        return self._call("round_diagnostics", round_idx, round_idx=round_idx) if self.has_diagnostics else []

    def client_diagnostics(self, ctx: ClientContext) -> list[dict[str, Any]]:
        if not self.has_client_diagnostics:
            return []
        return self._call("client_diagnostics", ctx, client=ctx.client_id, round_idx=ctx.round_idx)

    def predict(
        self, ctx: ClientContext, state: State, queries: list[MethodSample], rng_seed: int | None = None
    ) -> list[str]:
        return self._call(
            "predict", ctx, state, list(queries), rng_seed=rng_seed, client=ctx.client_id, round_idx=ctx.round_idx
        )

    def post_federation(
        self, federation: FederationContext, states: dict[int, State], server: State, rng_seed: int | None = None
    ) -> dict[int, State]:
        return self._call("post_federation", federation, states, server, rng_seed=rng_seed)

    def adaptation_state(
        self, architecture: str, states: dict[int, State], server: State, client: int, rng_seed: int | None = None
    ) -> State:
        return self._call("adaptation_state", architecture, states, server, client, rng_seed=rng_seed, client=client)

    # -- life cycle ---------------------------------------------------------------------
    def kill(self) -> None:
        if self._proc.is_alive():
            self._proc.kill()
        self._proc.join(timeout=5)

    def close(self) -> None:
        try:
            if self._proc.is_alive():
                self._conn.send_bytes(dumps(("close", None, None, [])))
                self._proc.join(timeout=5)
        except (OSError, EOFError, BrokenPipeError):
            pass
        self.kill()
        self._conn.close()


def _confinement_args(confinement: Confinement | None) -> dict[str, list[str]] | None:
    return None if confinement is None else {"hidden": list(confinement.hidden), "kept": list(confinement.kept)}


def rebuild_error(cls: type, text: str) -> BaseException:
    """A drake_bench error of class ``cls`` carrying ``text``, as the codec sends an error back from a worker: its
    class and message only (some classes take structured arguments, which do not cross)."""
    exc = Exception.__new__(cls)
    Exception.__init__(exc, text)
    return exc
