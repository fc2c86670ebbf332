"""Measured compute: a method's local training FLOPs against SFT's on the same steps, and compute matching.

Papers compare methods "at equal compute" by giving a costlier method fewer local steps (FedMosaic's
Table 15 prices itself at 1.161x SFT). A number the plugin declares about itself cannot be checked,
so the evaluator measures it instead, with a *compute probe* run before the federation:

* the method and the reference (SFT, the plain LoRA fine-tuning every entry is priced against) each
  start fresh, set up for this run, and train one client of every model in the allocation for two
  rounds of the run's local steps, with the server's ``aggregate`` of those clients' uploads in
  between. Both rounds train on that client's own first-round batches: the two prices then differ
  only by what the method does differently once it has trained a round and heard from the server
  (FedDPA, for one, trains its local adapter from a client's second round on, a second pass per
  step), not by the lengths of other batches;
* the evaluator counts the floating-point operations of those calls around the plugin's code, with
  torch's dispatch-level ``FlopCounterMode`` (matrix products and attention, forward and backward:
  the operations that dominate a transformer's cost; element-wise work is not counted);
* a method with a post-federation stage (``post_federation``: TAP's Stage 2 post-trains every client
  after the last round) has it priced too, per model: the probe clients train a further, uncounted round
  as the run's *last* round (a method may keep what that stage needs only then: TAP fills its Stage 2
  memory in the last rounds), the server aggregates it, and the stage runs on each probe client alone
  under the counter. It is client training the run does, so an "equal compute" board must pay for it
  as it pays for one-off setup;
* the federation's training compute is then
  ``setup + sum over clients of (first round + (rounds - 1) x second round + post-federation)``, each
  client priced by its model's probe: every round after the first is assumed to cost what the second
  did. ``measured_relative_compute`` is that total over SFT's;
* ``--compute-matched`` gives the method the step count whose total equals SFT's at the benchmark's
  steps, one-off set-up work (FedMosaic's alignment) and the post-federation stage (whose steps the
  method's own settings fix) included, assuming a round's cost grows linearly with its steps.

The server's ``aggregate`` is not priced: the board matches the clients' training, as the papers'
"relative compute" does.

FLOPs, unlike seconds, do not depend on what else the machine runs, so the matched step count (and
with it the run) is the same on every rerun. The probe is cached in the run's checkpoint folder.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

if TYPE_CHECKING:  # pragma: no cover - typing only
    from drake_bench.plugins.protocol import ClientContext, FederationContext
    from drake_bench.results.result_file import RunResult
    from drake_bench.streams.stream import FederatedData


class ProbeHost(Protocol):
    """What the probe needs from the evaluator (kept as a protocol: the evaluator imports this module)."""

    config: Any
    spec: Any
    allocation: dict[int, str]
    checkpoints: dict[str, dict[str, Any]]  # model -> its weights' identity (hashes)

    def open_method(self, name: str, config: dict[str, Any], seed: int) -> Any: ...
    def federation_context(self, fed: FederatedData, seed: int, steps: int) -> FederationContext: ...
    def ctx(self, client: int, round_idx: int, seed: int) -> ClientContext: ...
    def setup_seed(self, seed: int) -> int: ...
    def init_client_seed(self, seed: int, client: int) -> int: ...


REFERENCE_METHOD = "sft"
PROBE_VERSION = 3
"""3: a post-federation stage is priced as well (2: a second, steady-state round is priced as well; 1 priced every
round as the first). Version 3 measures what version 2 did for a method without a post-federation stage, so a
version-2 record of a run that had none is current (:func:`probe_is_current`)."""


def recorded_probe_version(record: dict[str, Any] | None) -> int | None:
    """The probe version a result file's ``fl.extra.compute`` records (None: the run was not probed; a record without
    a version counts as version 1's)."""
    return int(record.get("version", 1)) if record else None


def probe_is_current(result: RunResult) -> bool:
    """Whether a result file's ``fl.extra.compute`` is what the current probe would measure: recorded by the current
    version, or by version 2 for a run without a post-federation stage (``raw.post_federation_costs`` empty), which
    version 3 prices exactly as version 2 did."""
    version = recorded_probe_version(result.fl.extra.get("compute"))
    if version is None:
        return False
    return version >= PROBE_VERSION or (version == 2 and not result.raw.post_federation_costs)


class ComputeProbe(BaseModel):
    """What the compute probe measured (recorded in the result file's ``fl.extra.compute``)."""

    model_config = ConfigDict(extra="forbid")

    version: int = Field(PROBE_VERSION, description="Version of the probe's procedure (bumped if it changes).")
    method: str = Field(description="The method measured.")
    reference: str = Field(REFERENCE_METHOD, description="The method it is priced against (SFT: plain LoRA training).")
    local_steps: int = Field(description="The benchmark's local steps per round the probe trained for.")
    rounds: int = Field(description="Rounds of the run (setup is spread over them).")
    clients_per_model: dict[str, int] = Field(description="How many clients run each model of the allocation.")
    probe_clients: dict[str, int] = Field(description="The client whose two probe rounds priced each model.")
    setup_flops: int = Field(description="The method's one-off setup FLOPs (e.g. weight alignment).")
    first_round_flops: dict[str, int] | None = Field(
        None,
        description="The method's FLOPs for a client's first round, per model (None in a version-1 probe, "
        "which priced every round as the first).",
    )
    round_flops: dict[str, int] = Field(
        description="The method's FLOPs for a client round after the first (its second, after the server's "
        "aggregate), per model: the price of every round but the first."
    )
    reference_setup_flops: int = Field(description="The reference's one-off setup FLOPs.")
    reference_first_round_flops: dict[str, int] | None = Field(
        None, description="The reference's FLOPs for a client's first round, per model (None in a version-1 probe)."
    )
    reference_round_flops: dict[str, int] = Field(
        description="The reference's FLOPs for a client round after the first, per model."
    )
    post_federation_flops: dict[str, int] = Field(
        default_factory=dict,
        description="The method's FLOPs for one client's post-federation stage, per model "
        "(empty: no such stage, or a probe before version 3).",
    )
    reference_post_federation_flops: dict[str, int] = Field(
        default_factory=dict, description="The reference's post-federation FLOPs per model (SFT has no such stage)."
    )
    declared_relative_compute: float = Field(description="What the method's meta.relative_compute declares.")

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> ComputeProbe:
        """The probe a result file's ``fl.extra.compute`` records (its derived numbers are recomputed)."""
        return cls(**{k: v for k, v in record.items() if k in cls.model_fields})

    def _post_federation(self, post: dict[str, int]) -> float:
        """Every client's post-federation stage, priced by its model's probe."""
        return sum(n * post.get(m, 0) for m, n in self.clients_per_model.items())

    @property
    def fixed_flops(self) -> float:
        """The method's FLOPs that do not scale with the local steps: setup and the post-federation stage."""
        return self.setup_flops + self._post_federation(self.post_federation_flops)

    def flops_at_steps(self, steps: int) -> float:
        """The method's federation training FLOPs at ``steps`` local steps a round: the rounds scale with the
        steps; setup and the post-federation stage do not."""
        return self.fixed_flops + (self.method_total_flops - self.fixed_flops) * steps / self.local_steps

    def _all_rounds(self, first: dict[str, int] | None, later: dict[str, int]) -> float:
        """Every client's every round, each priced by its model's probe (setup excluded): its first round, then
        ``rounds - 1`` rounds at the second round's price."""
        first = first if first is not None else later
        if self.rounds < 1:
            return 0.0
        return sum(n * (first[m] + (self.rounds - 1) * later[m]) for m, n in self.clients_per_model.items())

    @property
    def method_total_flops(self) -> float:
        """The method's federation training FLOPs at the benchmark's local steps."""
        return self.fixed_flops + self._all_rounds(self.first_round_flops, self.round_flops)

    @property
    def reference_total_flops(self) -> float:
        return (
            self.reference_setup_flops
            + self._all_rounds(self.reference_first_round_flops, self.reference_round_flops)
            + self._post_federation(self.reference_post_federation_flops)
        )

    @property
    def measured_relative_compute(self) -> float:
        """Method over reference, federation-wide, at the same local steps."""
        return self.method_total_flops / self.reference_total_flops if self.reference_total_flops else float("nan")

    @property
    def matched_local_steps(self) -> int:
        """The local steps that spend the reference's federation FLOPs (at least 1): the rounds scale with the steps,
        setup and the post-federation stage do not."""
        steps = self._steps_in_budget()
        return self.local_steps if steps is None else max(1, round(steps))

    def _steps_in_budget(self) -> float | None:
        """The local steps a round (unrounded) that the reference's FLOPs leave once the method's fixed costs are
        paid; None for a method whose rounds cost nothing (zero-shot: nothing to match)."""
        per_step = self._all_rounds(self.first_round_flops, self.round_flops) / self.local_steps
        if per_step <= 0:
            return None
        return (self.reference_total_flops - self.fixed_flops) / per_step

    @property
    def over_budget(self) -> bool:
        """True when the floor of one local step, not the budget, set the matched steps: the method's setup and
        post-federation stage leave it less than half a step a round, so even matched it spends more than the
        reference (``matched_relative_compute`` says how much more)."""
        steps = self._steps_in_budget()
        return steps is not None and steps < 0.5

    def over_budget_at(self, steps: int) -> bool:
        """:attr:`over_budget` for a run at ``steps`` local steps: only a run at the matched steps is one that
        matching could not bring to the budget (a run at other steps was not matched at all)."""
        return steps == self.matched_local_steps and self.over_budget

    def relative_compute_at(self, steps: int) -> float:
        """Method over reference, federation-wide, with the method at ``steps`` local steps a round and the
        reference at the benchmark's."""
        return self.flops_at_steps(steps) / self.reference_total_flops if self.reference_total_flops else float("nan")

    @property
    def matched_relative_compute(self) -> float:
        """:meth:`relative_compute_at` the matched steps: 1 up to rounding to whole steps, above it when
        :attr:`over_budget`."""
        return self.relative_compute_at(self.matched_local_steps)

    def over_budget_note(self) -> str:
        """What a compute-matched run of an :attr:`over_budget` method says (empty otherwise)."""
        if not self.over_budget:
            return ""
        fixed = self.fixed_flops / self.reference_total_flops
        return (
            f"method {self.method!r}: its setup and post-federation stage alone cost {fixed:.2f}x "
            f"{self.reference}'s federation FLOPs, so compute matching leaves it the minimum of 1 local step a "
            f"round and it still spends {self.matched_relative_compute:.2f}x {self.reference}'s FLOPs "
            "(fl.extra.compute.matched_relative_compute): this run is not at equal compute"
        )

    def summary(self) -> dict[str, Any]:
        """The probe plus its derived numbers, as written into the result file."""
        return {
            **self.model_dump(mode="json"),
            "measured_relative_compute": self.measured_relative_compute,
            "matched_local_steps": self.matched_local_steps,
            "method_total_flops": self.method_total_flops,
            "reference_total_flops": self.reference_total_flops,
            "matched_relative_compute": self.matched_relative_compute,
            "over_budget": self.over_budget,
        }


class _Measured(BaseModel):
    """One method's probe: setup FLOPs and, per model, first-round, later-round and post-federation FLOPs."""

    setup: int
    first: dict[str, int]
    later: dict[str, int]
    post: dict[str, int]


def _probe_one(
    ev: ProbeHost,
    name: str,
    config: dict[str, Any],
    fed: FederatedData,
    seed: int,
    steps: int,
    clients: dict[str, int],
    rounds: int,
) -> _Measured:
    """The FLOPs of ``name`` run fresh under this run's settings: each model's probe client trains its first round,
    the server aggregates those uploads, and the same clients train their second round from the server's messages,
    on the same batches as the first (a one-round run has no second round: it is priced as the first). A method with
    a post-federation stage then has its clients train the run's last round (uncounted), the server aggregate it, and
    the stage run on each probe client alone, counted."""
    method = ev.open_method(name, config, seed)
    try:
        federation = ev.federation_context(fed, seed, steps)
        method.count_flops(True)
        method.setup(federation, rng_seed=ev.setup_seed(seed))
        setup = method.counted_flops().get("setup", 0)
        uid_key = secrets.token_bytes(16)
        batches = {c: fed.round_batches(c, 0, local_steps=steps, uid_key=uid_key) for c in clients.values()}
        states, uploads = {}, {}
        first: dict[str, int] = {}
        for model, client in clients.items():
            ctx = ev.ctx(client, 0, seed)
            state = method.init_client(ctx, rng_seed=ev.init_client_seed(seed, client))
            method.count_flops(True)
            uploads[client], states[client] = method.client_update(ctx, state, None, batches[client], rng_seed=ctx.seed)
            first[model] = method.counted_flops().get("client_update", 0)
        later = dict(first)
        server = method.init_server()
        if rounds >= 2:
            messages, server = method.aggregate(0, server, uploads, rng_seed=seed)
            for model, client in clients.items():
                ctx = ev.ctx(client, 1, seed)
                method.count_flops(True)
                uploads[client], states[client] = method.client_update(
                    ctx, states[client], messages[client], batches[client], rng_seed=ctx.seed
                )
                later[model] = method.counted_flops().get("client_update", 0)
        post: dict[str, int] = {}
        if method.has_post_federation:
            method.count_flops(False)
            last = rounds - 1
            if last >= 2:  # the run's last round, which the probe has not trained yet
                messages, server = method.aggregate(last - 1, server, uploads, rng_seed=seed)
                for client in clients.values():
                    ctx = ev.ctx(client, last, seed)
                    uploads[client], states[client] = method.client_update(
                        ctx, states[client], messages[client], batches[client], rng_seed=ctx.seed
                    )
            _, server = method.aggregate(max(last, 0), server, uploads, rng_seed=seed)
            for model, client in clients.items():
                method.count_flops(True)
                method.post_federation(federation, {client: states[client]}, server)
                post[model] = method.counted_flops().get("post_federation", 0)
        return _Measured(setup=setup, first=first, later=later, post=post)
    finally:
        method.close()


def probe_compute(
    ev: ProbeHost,
    fed: FederatedData,
    seed: int,
    method_config_dump: dict[str, Any],
    declared: float,
    cache_dir: Path | None = None,
) -> ComputeProbe:
    """Measure the configured method against SFT on this run's data (see the module docstring).

    Cached as ``compute-probe.json`` in ``cache_dir`` (keyed by what shapes it), so a resumed run does not probe
    again; the reference's half is cached beside the methods' folders (``compute-reference/``), so every method
    run into the same output folder on the same benchmark, allocation and steps (a leaderboard's) prices itself
    against one SFT probe instead of repeating it.
    """
    from drake_bench._version import __version__

    cfg = ev.config
    steps = ev.settings.local_steps  # as configured, else the manifest's (drake_bench.evaluator.settings)
    rounds = fed.config.rounds
    clients_per_model: dict[str, int] = {}
    probe_clients: dict[str, int] = {}
    for c in sorted(fed.clients):
        model = ev.allocation[c]
        clients_per_model[model] = clients_per_model.get(model, 0) + 1
        probe_clients.setdefault(model, c)
    # what shapes a client round's FLOPs besides the method: the data and its batches, the models and their weights
    shared = {
        "v": PROBE_VERSION,
        "drake_bench": __version__,
        "seed": seed,
        "steps": steps,
        "clients": probe_clients,
        "manifest": ev.spec.content_hash,
        "data": fed.store.data_hash,
        "batch_size": fed.config.batch_size,
        "allocation": dict(ev.allocation),
        "weights": ev.checkpoints,
    }
    key = _key(
        {**shared, "method": cfg.method, "config": method_config_dump, "rounds": rounds, "counts": clients_per_model}
    )
    cache = cache_dir / "compute-probe.json" if cache_dir is not None else None
    stored = _read(cache, key, ComputeProbe)
    if stored is not None:
        return stored
    # the reference loads its models as the method does (FLOPs depend on the architecture, not the weights)
    ref_config = {k: method_config_dump[k] for k in ("model_loader",) if k in method_config_dump}
    m = _probe_one(ev, cfg.method, cfg.method_config, fed, seed, steps, probe_clients, rounds)
    ref_key = _key({**shared, "method": REFERENCE_METHOD, "config": ref_config, "two_rounds": rounds >= 2})
    ref_cache = (
        cache_dir.parent / "compute-reference" / f"{hashlib.sha256(ref_key.encode()).hexdigest()[:16]}.json"
        if cache_dir is not None
        else None
    )
    ref = _read(ref_cache, ref_key, _ReferenceProbe)
    if ref is None:
        r = _probe_one(ev, REFERENCE_METHOD, ref_config, fed, seed, steps, probe_clients, rounds)
        ref = _ReferenceProbe(
            setup_flops=r.setup, first_round_flops=r.first, round_flops=r.later, post_federation_flops=r.post
        )
        _write(ref_cache, ref_key, ref.model_dump())
    probe = ComputeProbe(
        method=cfg.method,
        local_steps=steps,
        rounds=rounds,
        clients_per_model=clients_per_model,
        probe_clients=probe_clients,
        setup_flops=m.setup,
        first_round_flops=m.first,
        round_flops=m.later,
        post_federation_flops=m.post,
        reference_setup_flops=ref.setup_flops,
        reference_first_round_flops=ref.first_round_flops,
        reference_round_flops=ref.round_flops,
        reference_post_federation_flops=ref.post_federation_flops,
        declared_relative_compute=declared,
    )
    _write(cache, key, probe.model_dump(mode="json"))
    return probe


def _key(doc: dict[str, Any]) -> str:
    return json.dumps(doc, sort_keys=True, default=str)


PROBE_CACHE_MAX_BYTES = 16 * 2**20
"""The most bytes of a cached probe (``compute-probe.json``, ``compute-reference/*.json``). One holds its key (the
run's settings, every client's model among them) and a few FLOP counts per model: a few KB for the shipped boards;
16 MiB leaves room for an allocation of a hundred thousand clients, and a larger file is no probe of ours."""


class _ReferenceProbe(BaseModel):
    """The reference's half of a probe, as cached in ``compute-reference/``."""

    setup_flops: int
    first_round_flops: dict[str, int] | None
    round_flops: dict[str, int]
    post_federation_flops: dict[str, int]


_Cached = TypeVar("_Cached", ComputeProbe, _ReferenceProbe)


def _read(path: Path | None, key: str, kind: type[_Cached]) -> _Cached | None:
    """The ``kind`` cached at ``path`` if it was stored under ``key``, else None: the probe is measured (again) and
    the file replaced. The file lies in a run's output folder, which may have been copied from elsewhere or edited:
    one that does not read as a probe record (not JSON, larger or deeper than one, not the probe its key says) is no
    cache, and a warning says so (a measurement costs minutes on a real board)."""
    from drake_bench.core.json_files import read_json
    from drake_bench.errors import JSONFileError

    if path is None or not path.is_file():
        return None
    try:  # drake_bench wrote it with json.dumps, which writes NaN for a NaN it was given: NaN reads back
        stored = read_json(path, what="compute probe cache", max_bytes=PROBE_CACHE_MAX_BYTES, allow_nan=True)
    except JSONFileError as exc:
        warnings.warn(
            f"{exc}; not a cached compute probe, so the probe is measured again", RuntimeWarning, stacklevel=3
        )
        return None
    if not isinstance(stored, dict):
        warnings.warn(
            f"{path} is not a cached compute probe (a JSON object); the probe is measured again",
            RuntimeWarning,
            stacklevel=3,
        )
        return None
    if stored.get("key") != key:
        return None  # another run's settings: measured for this one
    try:
        return kind.model_validate(stored.get("probe"))
    except ValidationError as exc:
        warnings.warn(
            f"{path} is not a cached compute probe ({exc.error_count()} field(s) wrong, first: "
            f"{'.'.join(map(str, exc.errors()[0]['loc'])) or 'the probe'}: {exc.errors()[0]['msg']}); "
            "the probe is measured again",
            RuntimeWarning,
            stacklevel=3,
        )
        return None


def _write(path: Path | None, key: str, value: dict[str, Any]) -> None:
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".{secrets.token_hex(4)}.tmp")  # two runs may probe at once: whole files only
    tmp.write_text(json.dumps({"key": key, "probe": value}, indent=1))
    tmp.replace(path)
