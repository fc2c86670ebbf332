"""Method registry: methods are discovered through the ``drake_bench.methods`` entry-point group.

The reference entries register exactly as third parties do (see pyproject's
``[project.entry-points."drake_bench.methods"]``); a plugin package adds the same table to
its own pyproject and is found after ``pip install``, no fork needed. Scripts and notebooks can
also call :func:`register_method`. Two methods with one name is an error: a silent overwrite
would make results unattributable. Every registration is checked against the
:class:`~drake_bench.plugins.protocol.Method` protocol (as lm-eval's registry checks a base type), so a
plugin that is not a method fails when it is registered or created, naming what it lacks.
"""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any

from drake_bench.errors import PluginError, UnknownNameError
from drake_bench.plugins.protocol import Method, protocol_problems

GROUP = "drake_bench.methods"
_explicit: dict[str, Any] = {}


def registered_in_process() -> dict[str, Any]:
    """The methods :func:`register_method` registered in this process, by name (a copy): a worker process started
    for one of them must import it by its module path, since it is not among the entry points."""
    return dict(_explicit)


def _grouped() -> dict[str, list[EntryPoint]]:
    """Every entry point of the group by name, one per distinct target (a package installed twice is one)."""
    found: dict[str, list[EntryPoint]] = {}
    for ep in entry_points(group=GROUP):
        same = found.setdefault(ep.name, [])
        if all(other.value != ep.value for other in same):
            same.append(ep)
    return found


def _entry_points() -> dict[str, EntryPoint]:
    """The names that exactly one plugin claims. A name two packages claim is left out here and refused where it is
    asked for (:func:`method_class`), so that one pair of clashing third-party plugins does not stop every run."""
    return {name: eps[0] for name, eps in _grouped().items() if len(eps) == 1}


def _clash(name: str) -> PluginError | None:
    """The error for a method name that two or more installed plugins claim, else None."""
    eps = _grouped().get(name, [])
    if len(eps) < 2:
        return None
    claims = " and ".join(f"{ep.value!r} ({_dist(ep)})" for ep in eps)
    return PluginError(
        f"method name clash: {name!r} is registered by {claims}; uninstall one of them (results are "
        "filed under the method's name, so two methods cannot share one)"
    )


def _dist(ep: EntryPoint) -> str:
    d = getattr(ep, "dist", None)
    return f"package {d.name}" if d is not None else "unknown package"


def register_method(cls: Any, name: str | None = None) -> Any:
    """Register a method class in-process (usable as a decorator). Clashes are errors."""
    problems = protocol_problems(cls)
    if problems:
        raise PluginError(f"{cls!r} is not a drake_bench Method: " + "; ".join(problems))
    key = name or cls.meta.name
    if key in _explicit and _explicit[key] is not cls:
        raise PluginError(f"method name clash: {key!r} is already registered in this process by {_explicit[key]!r}")
    claimed = _grouped().get(key, [])
    if claimed and all(f"{cls.__module__}:{cls.__qualname__}" != ep.value for ep in claimed):
        raise PluginError(f"method name clash: {key!r} is already provided by entry point {claimed[0].value!r}")
    _explicit[key] = cls
    return cls


def available_methods() -> list[str]:
    """Names of every method registered by entry point or :func:`register_method` (a clashing name too: asking
    for it says which plugins claim it)."""
    return sorted(set(_grouped()) | set(_explicit))


def method_class(name: str) -> Any:
    """The class registered as ``name`` (imported on first use); refuses one that is not a Method."""
    if name in _explicit:
        return _explicit[name]
    clash = _clash(name)
    if clash is not None:
        raise clash
    eps = _entry_points()
    if name not in eps:
        raise UnknownNameError("method", name, available_methods())
    try:
        cls = eps[name].load()
    except Exception as exc:  # a broken plugin must name itself
        raise PluginError(f"method plugin {name!r} ({eps[name].value}) failed to import: {exc!r}") from exc
    problems = protocol_problems(cls)
    if problems:
        raise PluginError(
            f"method plugin {name!r} ({eps[name].value}) is not a drake_bench Method: " + "; ".join(problems)
        )
    if cls.meta.name != name:
        raise PluginError(
            f"method plugin {name!r} ({eps[name].value}) calls itself {cls.meta.name!r} in its meta; "
            "the entry point's name and meta.name must agree (results are filed under it)"
        )
    return cls


def method_package(name: str) -> str | None:
    """``"<distribution> <version>"`` of the package whose entry point registers ``name``, with its source revision
    where one can be known (``drake_bench.core.provenance``), read without importing the plugin; None for a method
    registered in-process by :func:`register_method` or one not found."""
    import importlib.util

    from drake_bench.core.provenance import source_revision

    ep = None if name in _explicit else _entry_points().get(name)
    dist = getattr(ep, "dist", None)
    if ep is None or dist is None:
        return None
    spec = importlib.util.find_spec(ep.module.split(".")[0])  # a top-level name: found, not imported
    folder = None
    if spec is not None and spec.submodule_search_locations:
        folder = list(spec.submodule_search_locations)[0]
    elif spec is not None and spec.origin:
        folder = str(Path(spec.origin).parent)
    revision = source_revision(dist.name, folder) if folder else None
    return f"{dist.name} {dist.version}" + (f" ({revision})" if revision else "")


def create_method(name: str, config: dict[str, Any] | None = None) -> Method:
    """Instantiate a registered method with ``config`` validated by the method's own ``Config`` class."""
    cls = method_class(name)
    unknown = sorted(set(config or {}) - set(cls.Config.model_fields))
    if unknown:  # refused even when the plugin's Config would ignore extras: a typo must never be silently dropped
        raise PluginError(
            f"method {name!r}: invalid config {config!r}: unknown field(s) {unknown}; "
            f"its fields are {sorted(cls.Config.model_fields)} (`drake-bench describe {name}`)"
        )
    try:
        parsed = cls.Config(**(config or {}))
    except Exception as exc:
        raise PluginError(f"method {name!r}: invalid config {config!r}: {exc}") from exc
    try:
        method = cls(parsed)
    except Exception as exc:
        raise PluginError(f"method {name!r} failed in __init__: {type(exc).__name__}: {exc}") from exc
    if not isinstance(method, Method):
        raise PluginError(
            f"method {name!r} does not implement the Method protocol: " + "; ".join(protocol_problems(method))
        )
    problems = protocol_problems(method)
    if problems:
        raise PluginError(f"method {name!r} does not implement the Method protocol: " + "; ".join(problems))
    return method
