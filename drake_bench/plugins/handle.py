"""The evaluator's handle on a running method: the calls it makes, wherever the method runs.

A method plugin implements :class:`~drake_bench.plugins.protocol.Method`; the evaluator never calls it directly. It
holds a handle that guards every call (:class:`~drake_bench.plugins.guard.GuardedMethod`, in the evaluator's own
process) or carries it to a worker process and back
(:class:`~drake_bench.backends.worker_process.MethodProcess`). :class:`MethodHandle` names what both offer, so the
evaluator is written once against it, and a new place to run methods (another sandbox, a remote node) is one more
class with these members. ``tests/test_method_handle.py`` checks that both classes have every member with the same
parameters.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from drake_bench.benchmarks.sample import MethodSample
from drake_bench.errors import PluginError
from drake_bench.plugins.protocol import ClientContext, FederationContext, Message, MethodMeta, ModelIdentity, State


@runtime_checkable
class MethodHandle(Protocol):
    """A method the evaluator drives: its identity, what optional hooks it has, the guarded protocol calls, the
    measurements taken where it runs, and its life cycle. Every call either returns a checked value or raises one
    :class:`~drake_bench.errors.PluginError` naming the method, seed, client, round and call."""

    seed: int | None

    # -- identity and optional hooks (fixed once the method is loaded)
    @property
    def name(self) -> str: ...
    @property
    def meta(self) -> MethodMeta: ...
    @property
    def config_dump(self) -> dict[str, Any]:
        """The method's full config as JSON (the result file and the checkpoint fingerprint record it)."""
        ...

    @property
    def trains_clients_together(self) -> bool: ...
    @property
    def has_post_federation(self) -> bool: ...
    @property
    def has_adaptation(self) -> bool: ...
    @property
    def has_diagnostics(self) -> bool: ...
    @property
    def has_client_diagnostics(self) -> bool: ...

    # -- measured where the method runs
    def peak_memory_bytes(self) -> int: ...
    def count_flops(self, on: bool) -> None: ...
    def counted_flops(self) -> dict[str, int]: ...
    def model_identity(self, model_name: str) -> ModelIdentity: ...
    def evaluation_settings(self) -> dict[str, Any]: ...
    def error(self, call: str, problem: str, client: int | None = None, round_idx: int | None = None) -> PluginError:
        """The PluginError this handle raises for ``call`` (the evaluator's own checks of a returned value use it)."""
        ...

    # -- the protocol's calls, guarded
    def setup(self, federation: FederationContext, rng_seed: int | None = None) -> None: ...
    def init_client(self, ctx: ClientContext, rng_seed: int | None = None) -> State: ...
    def init_server(self, rng_seed: int | None = None) -> State: ...
    def client_update(
        self,
        ctx: ClientContext,
        state: State,
        message: Message | None,
        batches: Any,
        call: str = "client_update",
        rng_seed: int | None = None,
    ) -> tuple[Message, State]: ...
    def client_update_group(
        self,
        ctxs: list[ClientContext],
        states: list[State],
        messages: list[Message | None],
        batches: list[Any],
        rng_seed: int | None = None,
    ) -> list[tuple[Message, State]]: ...
    def aggregate(
        self, round_idx: int, server_state: State, uploads: dict[int, Message], rng_seed: int | None = None
    ) -> tuple[dict[int, Message], State]: ...
    def round_diagnostics(self, round_idx: int) -> list[dict[str, Any]]: ...
    def client_diagnostics(self, ctx: ClientContext) -> list[dict[str, Any]]: ...
    def predict(
        self, ctx: ClientContext, state: State, queries: list[MethodSample], rng_seed: int | None = None
    ) -> list[str]: ...
    def post_federation(
        self, federation: FederationContext, states: dict[int, State], server: State, rng_seed: int | None = None
    ) -> dict[int, State]: ...
    def adaptation_state(
        self, architecture: str, states: dict[int, State], server: State, client: int, rng_seed: int | None = None
    ) -> State: ...

    # -- life cycle
    def close(self) -> None:
        """Release what the handle holds (a worker process stops; nothing in-process)."""
        ...
