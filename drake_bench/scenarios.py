"""PFL scenarios: how a client's tasks are laid out over the federated rounds.

* ``static``: all of a client's tasks mixed into one i.i.d. stream (PFL-Static).
* ``dynamic``: tasks introduced in manifest order, an equal share of rounds each (PFL-Dynamic).
* ``async``: per-client round patterns such as (3, 7, 3, 7): rounds given to task 1..4.
* ``dirichlet``: the manifest's merged tasks split over clients with Dir(alpha) proportions (static).

Strings parse too: ``"static"``, ``"dynamic"``, ``"async"``, ``"async:3-7-3-7"``, ``"dirichlet:0.5"``.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from .errors import ScenarioError, UnknownNameError


class _Scenario(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def tag(self) -> str:
        """Short string form, used in file names and result files."""
        return self.kind  # type: ignore[attr-defined]


class Static(_Scenario):
    kind: Literal["static"] = "static"


class Dynamic(_Scenario):
    kind: Literal["dynamic"] = "dynamic"


class Asynchronous(_Scenario):
    """Per-client task-round patterns.

    ``patterns``: explicit client id -> pattern. When absent, each client draws one of the
    manifest's patterns uniformly at random with the stream seed (paper A.32: "each client
    randomly draws one of three task-round patterns").
    """

    kind: Literal["async"] = "async"
    patterns: dict[int, tuple[int, ...]] | None = None
    pattern: tuple[int, ...] | None = Field(default=None, description="One pattern for every client.")

    def tag(self) -> str:
        if self.pattern:
            return "async-" + "-".join(map(str, self.pattern))
        return "async"


class Dirichlet(_Scenario):
    kind: Literal["dirichlet"] = "dirichlet"
    alpha: float = Field(gt=0)

    def tag(self) -> str:
        return f"dirichlet-{self.alpha:g}"


Scenario = Annotated[Union[Static, Dynamic, Asynchronous, Dirichlet], Field(discriminator="kind")]
_ADAPTER: TypeAdapter[Scenario] = TypeAdapter(Scenario)
KINDS = ["static", "dynamic", "async", "dirichlet"]


def parse_scenario(value: "str | dict | Scenario") -> Scenario:
    """Accept a scenario object, a dict, or a short string; raise a clear error otherwise."""
    if isinstance(value, _Scenario):
        return value  # type: ignore[return-value]
    if isinstance(value, dict):
        try:
            return _ADAPTER.validate_python(value)
        except ValidationError as exc:
            raise ScenarioError(f"invalid scenario {value!r}: {exc.errors()[0]['msg']}") from None
    if not isinstance(value, str):
        raise ScenarioError(f"a scenario is a string or a Scenario, got {type(value).__name__}")
    kind, _, arg = value.partition(":")
    kind = kind.strip().lower()
    if kind == "static" and not arg:
        return Static()
    if kind == "dynamic" and not arg:
        return Dynamic()
    if kind in ("async", "asynchronous"):
        if not arg:
            return Asynchronous()
        try:
            return Asynchronous(pattern=tuple(int(x) for x in arg.replace(",", "-").split("-")))
        except ValueError:
            raise ScenarioError(f"async pattern must look like 'async:3-7-3-7', got {value!r}") from None
    if kind == "dirichlet":
        try:
            return Dirichlet(alpha=float(arg))
        except (ValueError, ValidationError):
            raise ScenarioError(f"dirichlet needs a positive alpha, e.g. 'dirichlet:0.5', got {value!r}") from None
    raise UnknownNameError("scenario", value, ["static", "dynamic", "async", "async:3-7-3-7", "dirichlet:0.5"])
