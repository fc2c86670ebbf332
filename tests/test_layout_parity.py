"""Embedded and real benchmarks share one built layout: same files, same Arrow schema, same reader."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from drake_bench import load_benchmark
from drake_bench.benchmarks.store import BuiltBenchmark, features
from drake_bench.streams.stream import load_client_stream


def _shape(root: Path) -> set[str]:
    out = set()
    for p in root.rglob("*"):
        if p.is_file() and ".arrow_cache" not in p.parts:
            rel = p.relative_to(root).as_posix()
            parts = rel.split("/")
            out.add("data/<task>/" + parts[-1] if parts[0] == "data" else rel)
    return out


def test_synth_build_has_the_layout_of_a_source_build(toy_loader, tmp_path):
    from conftest import toy_spec

    from drake_bench.benchmarks.build import build_benchmark
    from drake_bench.benchmarks.manifest import manifest_dict, parse_manifest
    from drake_bench.benchmarks.synth import build_synth

    # a source build with a validation split, as every benchmark version since the split existed holds one
    spec = toy_spec()
    rule = spec.subsampling.model_copy(update={"validation_ratio": 0.1})
    spec = parse_manifest(
        manifest_dict(spec.model_copy(update={"subsampling": rule, "content_hash": None})), where="toy"
    )
    real_root = build_benchmark(spec, source_dir=None, out=tmp_path / "real", show_progress=False)
    synth_root = build_synth("drake-synth", out=tmp_path / "synth", tasks=["vqa-corners", "rel-defect-2"])
    assert "data/<task>/validation-00000-of-00001.parquet" in _shape(synth_root)
    assert _shape(synth_root) == _shape(real_root)
    a = pq.read_schema(next(Path(real_root).glob("data/*/train-*.parquet")))
    b = pq.read_schema(next(Path(synth_root).glob("data/*/train-*.parquet")))
    assert a.names == b.names == list(features())
    assert a.remove_metadata().equals(b.remove_metadata())
    info = BuiltBenchmark.open(synth_root).info
    assert set(info["sizes"]) == {"vqa-corners", "rel-defect-2"} and info["manifest_hash"].startswith("sha256:")


def test_one_reader_serves_both(toy_built, tmp_path):
    spec, real_root = toy_built
    s_real = load_client_stream(spec, 1, "static", data_dir=real_root)
    from drake_bench.benchmarks.synth import build_synth

    root = build_synth("drake-synth", out=tmp_path / "synth2", tasks=load_benchmark("drake-synth").client(2).tasks)
    s_synth = load_client_stream("drake-synth", 2, "static", data_dir=root)
    assert type(s_real) is type(s_synth)
    assert len(next(iter(s_real.round(0)))) > 0 and len(next(iter(s_synth.round(0)))) > 0
