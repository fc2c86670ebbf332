"""Every registered method explains every setting: `drake-bench describe METHOD` shows each Config field's
description, so a field without one is a knob a user cannot understand without reading the code."""

from __future__ import annotations

from importlib.metadata import entry_points

import pytest

from drake_bench.plugins.registry import GROUP, available_methods, method_class

# the installed methods (entry points); other test modules register throwaway methods in-process
INSTALLED = sorted(set(available_methods()) & {ep.name for ep in entry_points(group=GROUP)})


def test_the_reference_methods_are_installed() -> None:
    assert {
        "fedmosaic",
        "fedit-pqlora",
        "fedit",
        "sft",
        "zero-shot",
        "fedrpca",
        "fedprox",
        "task-arithmetic",
        "ties",
    } <= set(INSTALLED)


@pytest.mark.parametrize("name", INSTALLED)
def test_every_config_field_has_a_description(name: str) -> None:
    config = method_class(name).Config
    missing = [field for field, info in config.model_fields.items() if not (info.description or "").strip()]
    assert not missing, f"{name}: Config fields without a description: {missing}"
