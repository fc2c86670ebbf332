"""Built synth benchmarks: same bytes for the same seed, 8:2 and 10k/1k rules, real layout, ensure_built."""

from __future__ import annotations

import json
from collections import Counter

from drake_bench.benchmarks.manifest import load_benchmark
from drake_bench.benchmarks.spec import SubsamplingRule
from drake_bench.benchmarks.store import BUILD_INFO, BuiltBenchmark
from drake_bench.benchmarks.synth import build_synth, ensure_built

TASKS = ["rel-count-across", "vqa-instance-count", "rsn-common-color", "vqa-quality-yesno"]


def test_same_seed_same_bytes_and_counts(tmp_path):
    a = build_synth("drake-synth", scale=0.1, out=tmp_path / "a", tasks=TASKS)
    b = build_synth("drake-synth", scale=0.1, out=tmp_path / "b", tasks=TASKS)
    ia, ib = (json.loads((r / BUILD_INFO).read_text()) for r in (a, b))
    assert ia["files"] == ib["files"] and ia["data_hash"] == ib["data_hash"]
    for rel in ia["files"]:
        assert (a / rel).read_bytes() == (b / rel).read_bytes()
    spec = load_benchmark("drake-synth")
    assert ia["manifest_hash"] == spec.content_hash and ia["synth_scale"] == 0.1 and ia["embedded"] is True
    assert ia["sizes"]["rel-count-across"] == {
        "train": 18,
        "validation": 2,
        "test": 5,
    }  # pool 25, 8:2, a tenth held out
    assert ia["sizes"]["vqa-instance-count"] == {"train": 36, "validation": 4, "test": 10}  # large task: pool 50
    bb = BuiltBenchmark.open(a)
    bb.verify()
    test = bb.samples("vqa-quality-yesno", "test", range(bb.size("vqa-quality-yesno", "test")))
    train = bb.samples("vqa-quality-yesno", "train", range(bb.size("vqa-quality-yesno", "train")))
    assert not {s.id for s in test} & {s.id for s in train}
    assert all(s.id.startswith("vqa-quality-yesno/") and s.choices == ["yes", "no"] for s in test + train)
    assert all(len(s.images) == 1 and s.images[0].size == (64, 64) for s in test)
    assert Counter(s.answer_type.value for s in train) == {"yes_no": 18}
    opened = bb.samples("rel-count-across", "train", [0])[0]
    assert len(opened.images) == 5 and opened.answer in opened.choices


def test_large_branch_when_scaled(tmp_path):
    """With the threshold scaled down (spec §10), the double-pool task takes the 10k/1k branch."""
    spec = load_benchmark("drake-synth")
    small = spec.model_copy(update={"subsampling": SubsamplingRule(large_threshold=40, train=30, test=8)})
    root = build_synth(small, scale=0.1, out=tmp_path / "c", tasks=["vqa-instance-count", "rel-spatial"])
    sizes = json.loads((root / BUILD_INFO).read_text())["sizes"]
    assert sizes["vqa-instance-count"] == {"train": 30, "test": 8}
    assert sizes["rel-spatial"] == {"train": 20, "test": 5}


def test_scale_change_rebuilds(tmp_path):
    r = build_synth("drake-synth", scale=0.1, out=tmp_path / "d", tasks=["rel-spatial"])
    build_synth("drake-synth", scale=0.2, out=r, tasks=["rel-spatial"])
    info = json.loads((r / BUILD_INFO).read_text())
    assert info["synth_scale"] == 0.2 and info["sizes"]["rel-spatial"] == {"train": 36, "validation": 4, "test": 10}


def test_ensure_built(tmp_path, monkeypatch):
    monkeypatch.setenv("DRAKE_BENCH_HOME", str(tmp_path))
    monkeypatch.setenv("DRAKE_BENCH_SYNTH_SCALE", "0.05")
    root = ensure_built("hflb-synth")
    assert root == tmp_path / "built" / "hflb-synth"
    info = json.loads((root / BUILD_INFO).read_text())
    assert len(info["sizes"]) == 36 and info["synth_scale"] == 0.05
    mtime = (root / BUILD_INFO).stat().st_mtime_ns
    assert ensure_built("hflb-synth") == root and (root / BUILD_INFO).stat().st_mtime_ns == mtime  # no rebuild


def test_two_processes_building_one_benchmark_at_once_both_succeed(tmp_path):
    """Two runs starting together on an embedded benchmark that is not built yet (a board's arms): the second
    waits for the first's build instead of writing the same shards (which failed on a vanished temporary file)."""
    import subprocess
    import sys

    code = (
        "from drake_bench.benchmarks.synth.builder import ensure_built; import json, sys; "
        "r = ensure_built('hflb-synth'); print(json.loads((r / 'build_info.json').read_text())['data_hash'])"
    )
    env = {**__import__("os").environ, "DRAKE_BENCH_HOME": str(tmp_path), "DRAKE_BENCH_SYNTH_SCALE": "0.05"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1][-2000:] for o in outs]
    assert outs[0][0] == outs[1][0] and outs[0][0].startswith("sha256:")
