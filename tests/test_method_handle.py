"""Both places a method runs offer the evaluator the same handle (drake_bench.plugins.handle.MethodHandle)."""

from __future__ import annotations

import inspect
import typing

import pytest

from drake_bench.backends.worker_process import MethodProcess
from drake_bench.plugins.guard import GuardedMethod
from drake_bench.plugins.handle import MethodHandle
from drake_bench.plugins.registry import create_method

MEMBERS = sorted(
    name
    for name, value in vars(MethodHandle).items()
    if not name.startswith("_") and (callable(value) or isinstance(value, property))
) + sorted(typing.get_type_hints(MethodHandle))
CALLS = [name for name in MEMBERS if callable(vars(MethodHandle).get(name)) and name in vars(MethodHandle)]
DATA = [name for name in MEMBERS if name not in CALLS]


def test_the_handle_names_the_calls_and_identity_the_evaluator_uses():
    assert {"client_update", "aggregate", "predict", "post_federation", "close", "count_flops"} <= set(CALLS)
    assert {"name", "meta", "seed", "config_dump", "has_adaptation", "trains_clients_together"} <= set(DATA)


@pytest.mark.parametrize("cls", [GuardedMethod, MethodProcess])
@pytest.mark.parametrize("call", CALLS)
def test_each_handle_has_every_call_with_the_protocols_parameters(cls, call):
    ours = getattr(cls, call, None)
    assert callable(ours), f"{cls.__name__} has no {call}"
    expected = inspect.signature(getattr(MethodHandle, call))
    got = inspect.signature(ours)
    assert [(p.name, p.kind, p.default) for p in got.parameters.values()] == [
        (p.name, p.kind, p.default) for p in expected.parameters.values()
    ], f"{cls.__name__}.{call}{got} is not MethodHandle.{call}{expected}"


@pytest.mark.parametrize("member", DATA)
def test_each_handle_has_every_identity_member(member):
    assert member in typing.get_type_hints(MethodProcess), f"MethodProcess does not declare {member}"
    assert hasattr(GuardedMethod(create_method("majority-answer", {}), seed=0), member), (
        f"GuardedMethod has no {member}"
    )


def test_a_live_worker_and_an_inline_method_are_both_method_handles_that_say_the_same():
    inline = GuardedMethod(create_method("majority-answer", {}), seed=0)
    assert isinstance(inline, MethodHandle)
    worker = MethodProcess("majority-answer", {}, seed=0)
    try:
        assert isinstance(worker, MethodHandle)
        for member in DATA:
            assert getattr(worker, member) == getattr(inline, member), member
    finally:
        worker.close()
