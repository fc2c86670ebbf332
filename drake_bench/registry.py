"""Method registry: methods are discovered through the ``drake_bench.methods`` entry-point group.

The reference entries register exactly as third parties do (see pyproject's
``[project.entry-points."drake_bench.methods"]``); a plugin package adds the same table to
its own pyproject and is found after ``pip install``, no fork needed. Scripts and notebooks can
also call :func:`register_method`. Two methods with one name is an error (lm-eval's lesson:
silent overwrites make results unattributable).
"""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points
from typing import Any

from .errors import PluginError, UnknownNameError
from .protocol import Method

GROUP = "drake_bench.methods"
_explicit: dict[str, Any] = {}


def _entry_points() -> dict[str, EntryPoint]:
    found: dict[str, EntryPoint] = {}
    for ep in entry_points(group=GROUP):
        if ep.name in found and found[ep.name].value != ep.value:
            raise PluginError(
                f"method name clash: {ep.name!r} is registered by both {found[ep.name].value!r} "
                f"({_dist(found[ep.name])}) and {ep.value!r} ({_dist(ep)}); uninstall one"
            )
        found[ep.name] = ep
    return found


def _dist(ep: EntryPoint) -> str:
    d = getattr(ep, "dist", None)
    return f"package {d.name}" if d is not None else "unknown package"


def register_method(cls: Any, name: str | None = None) -> Any:
    """Register a method class in-process (usable as a decorator). Clashes are errors."""
    key = name or getattr(cls, "name", None)
    if not key:
        raise PluginError(f"{cls!r} has no `name`; give the class a `name` attribute")
    if key in _explicit and _explicit[key] is not cls:
        raise PluginError(f"method name clash: {key!r} is already registered in this process by {_explicit[key]!r}")
    eps = _entry_points()
    if key in eps and f"{cls.__module__}:{cls.__qualname__}" != eps[key].value:
        raise PluginError(f"method name clash: {key!r} is already provided by entry point {eps[key].value!r}")
    _explicit[key] = cls
    return cls


def available_methods() -> list[str]:
    return sorted(set(_entry_points()) | set(_explicit))


def method_class(name: str) -> Any:
    if name in _explicit:
        return _explicit[name]
    eps = _entry_points()
    if name not in eps:
        raise UnknownNameError("method", name, available_methods())
    try:
        return eps[name].load()
    except Exception as exc:  # a broken plugin must name itself
        raise PluginError(f"method plugin {name!r} ({eps[name].value}) failed to import: {exc!r}") from exc


def create_method(name: str, config: dict[str, Any] | None = None) -> Method:
    """Instantiate a registered method with a config dict validated by its own pydantic config class."""
    cls = method_class(name)
    try:
        method = cls(**(config or {})) if not hasattr(cls, "Config") else cls(cls.Config(**(config or {})))
    except Exception as exc:
        raise PluginError(f"method {name!r}: invalid config {config!r}: {exc}") from exc
    missing = [a for a in ("setup", "init_client", "init_server", "client_update", "aggregate", "predict", "name", "version", "config") if not hasattr(method, a)]
    if missing:
        raise PluginError(f"method {name!r} does not implement the Method protocol: missing {missing}")
    return method
