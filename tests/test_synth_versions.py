"""Benchmark versions: redesigned generators leave archived manifests building byte for byte."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from drake_bench.benchmarks.manifest import archived_benchmarks, available_benchmarks, load_benchmark
from drake_bench.benchmarks.synth.loader import SYNTH_LOADER, fresh_items, task_generator
from drake_bench.benchmarks.synth.registry import generator, get_generator, iter_generators
from drake_bench.benchmarks.synth.world import BASE_VERSION, COLOR_FIGURES, GENERATOR_VERSION, SHAPE_FIGURES
from drake_bench.errors import SourceError, UnknownNameError

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import record_board_builds as board_builds  # noqa: E402

REDESIGNED_IN_4 = {"rsn-find-image", "rsn-common-color", "rsn-common-shape"}


def test_registry_serves_the_newest_implementation_not_newer_than_asked():
    for name in REDESIGNED_IN_4:
        old, new = get_generator(name, 3), get_generator(name, 4)
        assert (old.version, new.version) == (3, 4) and old.fn is not new.fn
        assert get_generator(name) is new
    same = get_generator("rel-spatial")
    assert get_generator("rel-spatial", 3) is same is get_generator("rel-spatial", 4) and same.version == BASE_VERSION
    with pytest.raises(UnknownNameError, match="generator version 2 in synth generator 'rel-spatial'"):
        get_generator("rel-spatial", 2)
    assert {g.name for g in iter_generators(every_version=True) if g.version == 4} == REDESIGNED_IN_4


def test_legacy_holds_exactly_the_implementations_only_archived_versions_draw():
    """Family modules hold what current manifests draw; synth.legacy the frozen rest (the image-quality variants
    share their bodies across versions, so only whole functions are checked)."""
    from functools import partial

    current = {
        id(get_generator(t.source.variant, t.source.rule["generator_version"]))
        for name in ("drake-synth", "hflb-synth", "fedllm-synth")
        for t in load_benchmark(name).tasks
    }
    for g in iter_generators(every_version=True):
        if isinstance(g.fn, partial):
            continue
        in_legacy = g.fn.__module__.startswith("drake_bench.benchmarks.synth.legacy.")
        assert in_legacy != (id(g) in current), (g.name, g.version, g.fn.__module__)


def test_registering_a_version_twice_or_from_the_future_is_refused():
    with pytest.raises(ValueError, match="duplicate synth generator 'rel-spatial' for generator version 3"):
        generator("rel-spatial", "relation", get_generator("rel-spatial").answer_type, "single", (1, 1), "x")(
            lambda r: None
        )
    with pytest.raises(ValueError, match="newer than GENERATOR_VERSION"):
        generator(
            "brand-new",
            "relation",
            get_generator("rel-spatial").answer_type,
            "single",
            (1, 1),
            "x",
            version=GENERATOR_VERSION + 1,
        )(lambda r: None)
    with pytest.raises(UnknownNameError, match="unknown synth generator 'brand-new'"):
        get_generator("brand-new")  # the refused registration left nothing behind


def test_pinned_versions_load_current_and_archived_manifests():
    current = load_benchmark("drake-synth")
    assert load_benchmark(f"drake-synth@{current.version}") is current
    assert "drake-synth@1.3.0" in archived_benchmarks()
    old = load_benchmark("drake-synth@1.3.0")
    assert (old.name, old.version) == ("drake-synth", "1.3.0") and old.content_hash != current.content_hash
    assert all(t.source.rule["generator_version"] == 3 for t in old.tasks)
    changed = {t.id for t in load_benchmark("drake-synth@1.5.0").tasks if t.source.rule["generator_version"] == 4}
    assert changed == REDESIGNED_IN_4
    with pytest.raises(UnknownNameError, match="drake-synth@1.3.0"):
        load_benchmark("drake-synth@0.9")
    from drake_bench.benchmarks.synth.builder import synth_root

    assert synth_root(current).name == "drake-synth" and synth_root(old).name == "drake-synth@1.3.0"  # side by side


@pytest.mark.parametrize("pinned", archived_benchmarks())
def test_archived_manifests_are_what_their_file_names_say(pinned):
    spec = load_benchmark(pinned)
    assert f"{spec.name}@{spec.version}" == pinned and spec.name in available_benchmarks()
    assert spec.version != load_benchmark(spec.name).version  # the current version is never archived too


def test_manifest_from_the_future_is_refused_naming_the_task():
    task = load_benchmark("drake-synth").task("rel-spatial")
    future = task.model_copy(
        update={
            "source": task.source.model_copy(
                update={"rule": {**task.source.rule, "generator_version": GENERATOR_VERSION + 1}}
            )
        }
    )
    with pytest.raises(SourceError, match="task 'rel-spatial'.*install a newer drake_bench"):
        task_generator(future)


def test_old_and_new_items_of_a_redesigned_task():
    old, new = (
        load_benchmark("drake-synth@1.3.0").task("rsn-common-color"),
        load_benchmark("drake-synth").task("rsn-common-color"),
    )
    a, b = fresh_items(old, 6, seed=77), fresh_items(new, 6, seed=77)
    assert all(s.answer in {"red", "green", "blue", "yellow", "purple", "orange"} for s in a)
    assert all(s.answer in COLOR_FIGURES for s in b)  # 1.4.0 answers with the figure word
    assert (
        len(
            list(
                SYNTH_LOADER.load(
                    new.model_copy(
                        update={"source": new.source.model_copy(update={"rule": {**new.source.rule, "pool_size": 10}})}
                    ),
                    None,
                )
            )
        )
        == 10
    )


def test_the_build_record_covers_every_version_the_boards_cite_with_the_hashes_they_cite():
    """drake_bench/leaderboard/builds.json names each benchmark version a canonical board pins or an archived
    main-job board's result files ran on, with the very data hash they cite, and a content hash; the boards pin
    the same content hash (no build needed: the rebuild is the next test)."""
    from drake_bench.leaderboard import canonical_boards

    record, cited = board_builds.read_record(), board_builds.cited()
    assert set(record["builds"]) == set(cited)
    for ref, hashes in cited.items():
        assert hashes == {record["builds"][ref]["data_hash"]}, f"{ref}: result files and boards cite {hashes}"
        assert record["builds"][ref]["content_hash"].startswith("sha256:")
    for board in canonical_boards().values():
        pinned = record["builds"][f"{board.benchmark_name}@{board.benchmark_version}"]
        assert (board.data_hash, board.content_hash) == (pinned["data_hash"], pinned["content_hash"]), board.name


@pytest.mark.slow
def test_every_version_a_board_cites_rebuilds_its_data(tmp_path):
    """Boards stay reproducible across benchmark versions and library versions: today's code builds each version
    a board ranks on (current or archived) to the content hash recorded for it, and, with the pyarrow and Pillow
    versions the record was made with, to exactly the data hash its result files cite. With other versions the
    files' bytes differ (pyarrow writes its version into them; Pillow's encoders change) and the content hash is
    what shows the data is the same (docs/leaderboard.md, "Data hash and library versions")."""
    record = board_builds.read_record()
    built = board_builds.rebuild(sorted(record["builds"]), tmp_path)
    content = {
        ref: got["content_hash"]
        for ref, got in built.items()
        if got["content_hash"] != record["builds"][ref]["content_hash"]
    }
    assert not content, f"versions whose rebuild has other content than the boards ran on: {content}"
    if board_builds.libraries() == record["libraries"]:
        files = {
            ref: got["data_hash"]
            for ref, got in built.items()
            if got["data_hash"] != record["builds"][ref]["data_hash"]
        }
        assert not files, f"same pyarrow/Pillow as the record, yet other file bytes: {files}"


def test_a_rebuild_keeps_exactly_the_tasks_whose_definition_did_not_change(tmp_path):
    """Building 1.8.0 over 1.7.0 regenerates the tasks 1.8.0 redefined and no other; a new scale regenerates all."""
    from drake_bench.benchmarks.build import DONE_MARK
    from drake_bench.benchmarks.synth.builder import build_synth

    old, new = load_benchmark("drake-synth@1.7.0"), load_benchmark("drake-synth@1.8.0")
    kept = [t.id for t in new.tasks if t.id in {o.id for o in old.tasks} and t == old.task(t.id)][:2]
    changed = [t.id for t in new.tasks if t.id not in {o.id for o in old.tasks} or t != old.task(t.id)][:1]
    assert kept and changed
    tasks = kept + changed
    root = build_synth(
        "drake-synth@1.7.0", scale=0.1, out=tmp_path, tasks=[t for t in tasks if t in {o.id for o in old.tasks}]
    )
    marks = {t: (root / "data" / t / DONE_MARK).stat().st_mtime_ns for t in kept}
    root = build_synth("drake-synth@1.8.0", scale=0.1, out=tmp_path, tasks=tasks)
    assert {t: (root / "data" / t / DONE_MARK).stat().st_mtime_ns for t in kept} == marks  # reused as they were
    fresh = build_synth("drake-synth@1.8.0", scale=0.1, out=tmp_path / "fresh", tasks=tasks)
    info = lambda r: json.loads((r / "build_info.json").read_text())  # noqa: E731
    assert info(root)["data_hash"] == info(fresh)["data_hash"]
    rescaled = build_synth("drake-synth@1.8.0", scale=0.2, out=tmp_path, tasks=tasks)
    assert all((rescaled / "data" / t / DONE_MARK).stat().st_mtime_ns != marks[t] for t in kept)
    assert info(rescaled)["sizes"] != info(fresh)["sizes"]


def test_the_boards_cite_every_drake_synth_version_since_1_3_0():
    assert {f"drake-synth@1.{m}.0" for m in range(3, 9)} <= set(board_builds.cited())


def test_reasoning_group_speaks_the_figurative_lexicon():
    """Group structure: every reasoning client reads or answers in the lexicon on at least two tasks, no other
    group's task uses it (their colours and shapes are named literally)."""
    spec = load_benchmark("drake-synth")
    phrase = re.compile(rf"\b({'|'.join(COLOR_FIGURES)}) ({'|'.join(SHAPE_FIGURES)})s?\b")  # 'a fire wheel'

    def uses(task_id: str) -> bool:  # a figurative phrase in the text, or a figure word as the whole answer
        items = fresh_items(spec.task(task_id), 12, seed=5)
        return any(
            phrase.search(f"{s.question} {' '.join(s.choices)}")
            or s.answer in COLOR_FIGURES
            or s.answer in SHAPE_FIGURES
            for s in items
        )

    for c in spec.clients:
        n = sum(uses(t) for t in c.tasks)
        if c.group == "multimodal-reasoning":
            assert n >= 2, (c.id, n)
        else:
            assert n == 0, (c.id, [t for t in c.tasks if uses(t)])


def test_cli_list_shows_archived_versions(monkeypatch):
    import io

    from rich.console import Console
    from typer.testing import CliRunner

    from drake_bench.cli import app
    from drake_bench.commands import run as run_cmd

    buf = io.StringIO()
    monkeypatch.setattr(run_cmd, "_out", Console(file=buf, width=200))  # wide enough that no cell wraps
    out = CliRunner().invoke(app, ["list"])
    assert out.exit_code == 0, out.output
    rows = [r for r in buf.getvalue().splitlines() if "drake-synth" in r and "│" in r]
    assert any("drake-synth@1.3.0" in r and "1.3.0 (archived)" in r for r in rows), rows
    assert any("drake-synth " in r and load_benchmark("drake-synth").version in r for r in rows), rows


def test_a_rebuild_over_another_versions_build_drops_the_tasks_it_no_longer_has(tmp_path):
    """1.7.0 replaced rel-same-count; building 1.7.0 where 1.6.0 was built must not keep (and hash) its shards."""
    from drake_bench.benchmarks.synth.builder import build_synth

    build_synth("drake-synth@1.6.0", scale=0.1, out=tmp_path, tasks=["rel-same-count", "rel-spatial"])
    root = build_synth("drake-synth", scale=0.1, out=tmp_path, tasks=["rel-defect-2", "rel-spatial"])
    assert sorted(p.name for p in (root / "data").iterdir()) == ["rel-defect-2", "rel-spatial"]
    info = json.loads((root / "build_info.json").read_text())
    assert set(info["sizes"]) == {"rel-defect-2", "rel-spatial"}
    alone = build_synth("drake-synth", scale=0.1, out=tmp_path / "alone", tasks=["rel-defect-2", "rel-spatial"])
    assert json.loads((alone / "build_info.json").read_text())["data_hash"] == info["data_hash"]
