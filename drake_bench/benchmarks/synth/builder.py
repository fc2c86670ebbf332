"""Build embedded benchmarks through the shared builder, and build them on first use.

``build_synth`` wraps :func:`drake_bench.benchmarks.build.build_benchmark` (same subsampling, same
Parquet layout) and records the synth scale and generator version in build_info.json.
"""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

from drake_bench.benchmarks.build import DONE_MARK, build_benchmark, build_lock, is_built, read_task_mark
from drake_bench.benchmarks.manifest import available_benchmarks, load_benchmark
from drake_bench.benchmarks.spec import BenchmarkSpec
from drake_bench.benchmarks.store import BUILD_INFO, built_root, finalize_build
from drake_bench.benchmarks.synth.loader import _scale, current_scale
from drake_bench.benchmarks.synth.world import GENERATOR_VERSION
from drake_bench.errors import DrakeBenchError

SYNTH_BENCHMARKS = ("drake-synth", "hflb-synth", "fedllm-synth")


def _stamp(spec: BenchmarkSpec, scale: float) -> dict:
    return {"synth_scale": scale, "generator_version": GENERATOR_VERSION, "manifest_hash": spec.content_hash or ""}


def _matches(root: Path, spec: BenchmarkSpec, scale: float) -> bool:
    """Whether ``root`` holds a finished build of ``spec`` at ``scale``. A build record that does not read (the data
    folder is shared, or was copied) is no build of it: the benchmark is built again, which rewrites the record (tasks
    whose marks match are kept, see :func:`drake_bench.benchmarks.build.build_benchmark`), and a warning says so."""
    if not is_built(root):
        return False
    from drake_bench.core.json_files import MANIFEST_MAX_BYTES, read_json
    from drake_bench.errors import JSONFileError

    path = root / BUILD_INFO
    try:  # the limit BuiltBenchmark.open reads the same file with
        info = read_json(path, what="build record", max_bytes=MANIFEST_MAX_BYTES)
    except JSONFileError as exc:
        warnings.warn(f"{exc}; building {spec.name} again in {root}", RuntimeWarning)
        return False
    if not isinstance(info, dict):
        warnings.warn(
            f"{path} is not a build record (a JSON object); building {spec.name} again in {root}", RuntimeWarning
        )
        return False
    want = _stamp(spec, scale)
    return all(info.get(k) == v for k, v in want.items()) and not info.get("failed_tasks")


def build_synth(
    name: str | BenchmarkSpec,
    scale: float | None = None,
    out: str | Path | None = None,
    show_progress: bool = False,
    tasks: list[str] | None = None,
) -> Path:
    """Generate and build an embedded benchmark; returns the built root.

    ``scale`` multiplies every task's pool (default ``$DRAKE_BENCH_SYNTH_SCALE`` or 1). An existing
    build with another scale or manifest is replaced task by task, never mixed. ``tasks`` builds a subset.
    """
    spec = load_benchmark(name)
    if not spec.embedded:
        raise DrakeBenchError(f"benchmark {spec.name!r} is not embedded (embedded=false); use `drake-bench build`")
    token = _scale.set(scale)
    try:
        s = current_scale()
        root = Path(out) if out is not None else synth_root(spec)
        with build_lock(root):
            _build_synth_locked(spec, s, root, show_progress, tasks)
    finally:
        _scale.reset(token)
    return root


def _build_synth_locked(
    spec: BenchmarkSpec, s: float, root: Path, show_progress: bool, tasks: list[str] | None
) -> None:
    if is_built(root) and not _matches(root, spec, s):
        _drop_unrecorded(root)
    # a task whose definition, scale and generator code are unchanged keeps its shards (build.task_recipe)
    build_benchmark(
        spec,
        None,
        root,
        tasks=tasks,
        show_progress=show_progress,
        recipe_extra={"synth_scale": s, "generator_version": GENERATOR_VERSION},
    )
    finalize_build(
        root,
        spec.name,
        spec.content_hash or "",
        {"version": spec.version, "failed_tasks": [], "embedded": True, **_stamp(spec, s)},
    )


def _drop_unrecorded(root: Path) -> None:
    """Before a rebuild over another scale or version: remove the tasks whose mark records no recipe (built before
    recipes were recorded), which the builder would otherwise keep whatever they were built from."""
    data = root / "data"
    for folder in data.iterdir() if data.is_dir() else ():
        done = read_task_mark(folder / DONE_MARK)  # None for a mark that does not read: dropped, built again
        recorded = done is not None and "recipe" in done
        if folder.is_dir() and not recorded:
            shutil.rmtree(folder)


def synth_root(spec: BenchmarkSpec) -> Path:
    """Where an embedded benchmark is built: ``built/<name>`` for the shipped version, ``built/<name>@<version>``
    for an archived one, so runs on two versions side by side never rebuild each other's data."""
    current = spec.name in available_benchmarks() and load_benchmark(spec.name).version == spec.version
    return built_root(spec.name if current else f"{spec.name}@{spec.version}")


def ensure_built(name: str | BenchmarkSpec, scale: float | None = None) -> Path:
    """The built root of embedded benchmark ``name`` (a name, ``name@version`` or a spec; see ``synth_root``),
    building it if missing or stale."""
    spec = load_benchmark(name)
    root = synth_root(spec)
    token = _scale.set(scale)
    try:
        s = current_scale()
    finally:
        _scale.reset(token)
    if _matches(root, spec, s):
        return root
    with build_lock(root):  # another process may be building it: wait, then use its build
        if _matches(root, spec, s):
            return root
        return build_synth(spec, scale=s, out=root)
