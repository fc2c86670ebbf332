"""The transfer benchmark scripts' bookkeeping: group views and joining runs of different source clients."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import bench_probe_transfer  # noqa: E402
import bench_transfer  # noqa: E402

from drake_bench.benchmarks.manifest import load_benchmark  # noqa: E402


def _run(sources: list[int], bonus: dict[tuple[int, int], float], config: dict | None = None) -> dict:
    """A fake result: scratch scores 0.5 everywhere; source a adds bonus[(a, b)] on every task of client b."""
    spec = load_benchmark("drake-synth")
    scratch = {t: 0.5 for c in spec.clients for t in c.tasks}
    trained = {str(a): {t: 0.5 + bonus.get((a, c.id), 0.0) for c in spec.clients for t in c.tasks} for a in sources}
    return {
        "config": config or {"benchmark": "drake-synth", "lr": 1e-3},
        "scratch": scratch,
        "trained": trained,
        "source_scores": {str(a): {} for a in sources},
        "seconds": 1.0,
    }


def test_group_views_row_and_column():
    # reasoning clients 7, 8, 9; source 7 helps client 8 by 0.3; source 1 (relation) helps client 9 by 0.6
    res = _run([1, 7], {(7, 8): 0.3, (1, 9): 0.6})
    s = bench_transfer.summarise(res, reference="scratch")["by_group"]["multimodal-reasoning"]
    assert s["within"] == pytest.approx(100 * 0.3 / 2)  # source 7 into 8 and 9
    assert s["across"] == pytest.approx(0.0)  # source 7 into the seven clients of other groups
    assert s["from_other_groups"] == pytest.approx(100 * 0.6 / 3)  # source 1 into 7, 8 and 9


def test_merge_joins_sources_and_refuses_what_is_not_comparable(tmp_path):
    a, b = _run([7, 8], {(7, 8): 0.1}), _run([1], {(1, 7): 0.2})
    merged = bench_probe_transfer.merge([a, b], [tmp_path / "a", tmp_path / "b"])
    assert set(merged["trained"]) == {"1", "7", "8"} and merged["scratch"] == a["scratch"]
    assert merged["merged_from"] == [str(tmp_path / "a"), str(tmp_path / "b")]
    with pytest.raises(SystemExit, match="another protocol.*lr differ"):
        bench_probe_transfer.merge([a, _run([1], {}, {"benchmark": "drake-synth", "lr": 3e-3})], [Path("a"), Path("c")])
    other = _run([1], {})
    other["scratch"] = {**other["scratch"], "rel-spatial": 0.4}
    with pytest.raises(SystemExit, match="other scratch scores"):
        bench_probe_transfer.merge([a, other], [Path("a"), Path("d")])
    with pytest.raises(SystemExit, match=r"sources \['7'\] are in more than one run"):
        bench_probe_transfer.merge([a, _run([7], {})], [Path("a"), Path("e")])
