"""End to end: fixtures laid out exactly as each source is published, for every DRAKE and HFLB task -> build -> store -> client stream."""

from __future__ import annotations

import pytest
from fixtures_real import write_fixtures

from drake_bench.benchmarks.build import build_benchmark
from drake_bench.benchmarks.manifest import load_benchmark
from drake_bench.benchmarks.sources import UnconfirmedFormatWarning
from drake_bench.benchmarks.store import BuiltBenchmark


@pytest.mark.parametrize("name", ["drake", "hflb"])
def test_build_every_task_from_fixtures(name: str, tmp_path) -> None:
    spec = load_benchmark(name)
    src = write_fixtures(spec, tmp_path / "src", per_task=5)
    # five items per task are a sample of the sources: the manifests' expected pool sizes do not apply (check_expected=False)
    with pytest.warns(UnconfirmedFormatWarning):
        root = build_benchmark(spec, source_dir=src, out=tmp_path / "built", show_progress=False, check_expected=False)
    built = BuiltBenchmark.open(root)
    assert set(built.info["sizes"]) == {t.id for t in spec.tasks}
    assert built.info["failed_tasks"] == []
    for t in spec.tasks:
        sizes = (built.size(t.id, "train"), built.size(t.id, "validation"), built.size(t.id, "test"))
        assert sizes == (3, 1, 1), t.id  # 8:2 of 5, and at least one of the 4 training items held out as validation
        s = built.samples(t.id, "train", [0])[0]
        assert s.task_id == t.id and s.answer_type == t.answer_type
        assert len(s.images) >= max(1, t.num_images[0]) and s.images[0].size == (8, 8)
        if t.answer_type.value in ("multiple_choice", "yes_no"):
            assert s.answer in s.choices
    built.verify()

    stream_mod = pytest.importorskip("drake_bench.streams.stream")
    stream = stream_mod.load_client_stream(
        spec, 1, "dynamic", seed=0, data_dir=root, rounds=4, local_steps=2, batch_size=2
    )
    r, batches = next(iter(stream.rounds()))
    batch = next(iter(batches))
    assert r == 0 and 1 <= len(batch) <= 2 and batch[0].question
