"""A built folder left by a failed build is the data's fault, said as a data error (issue #61, part 5).

``drake-bench build`` keeps the tasks that built and records the others in ``build_info.json``'s ``failed_tasks``;
a stream over a client that holds a failed task must say which file lacks which task and how to rebuild it, not
raise a bare ``KeyError`` from ``BuiltBenchmark.size``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ToyLoader, toy_spec

from drake_bench.benchmarks.spec import TaskSpec
from drake_bench.errors import DataNotBuiltError, SourceError

BROKEN = "toy-broken"


class BrokenLoader(ToyLoader):
    """A loader whose source files are missing: every task it loads fails to build."""

    name = BROKEN

    def load(self, task: TaskSpec, source_dir: Path | None):  # noqa: ANN201
        raise SourceError(f"{task.id}: source file missing")


def test_a_task_whose_build_failed_is_a_data_error_naming_the_file_and_the_rebuild(toy_loader, tmp_path):
    from drake_bench.benchmarks.build import build_benchmark
    from drake_bench.benchmarks.manifest import manifest_dict, parse_manifest
    from drake_bench.loaders import _LOADERS, register_loader
    from drake_bench.streams.stream import load_client_stream

    if BROKEN not in _LOADERS:
        register_loader(BrokenLoader())
    manifest = manifest_dict(toy_spec())
    failed = manifest["tasks"][0]
    failed["source"]["loader"] = BROKEN
    spec = parse_manifest({k: v for k, v in manifest.items() if k != "content_hash"}, where="toy-broken")
    root = tmp_path / "built"
    with pytest.raises(SourceError, match="1 of .* tasks"):
        build_benchmark(spec, source_dir=None, out=root, show_progress=False)
    client = next(c.id for c in spec.clients if failed["id"] in c.tasks)

    with pytest.raises(DataNotBuiltError) as caught:
        load_client_stream(spec, client, scenario="static", data_dir=root)
    message = str(caught.value)
    assert not isinstance(caught.value, KeyError)
    assert str(root / "build_info.json") in message and repr(failed["id"]) in message
    assert "its build failed" in message and f"drake-bench build {spec.name} --task {failed['id']}" in message
    # a client whose tasks all built streams as before
    other = next(c.id for c in spec.clients if failed["id"] not in c.tasks)
    assert next(iter(load_client_stream(spec, other, scenario="static", data_dir=root).rounds()))[0] == 0


@pytest.mark.parametrize(
    "content",
    [b"[" * 100_000, b"\xff\xfe not utf-8", b'{"sizes": ' + b"9" * 5000 + b"}", b"[1, 2]"],
    ids=["deep", "not-utf8", "huge-int", "not-an-object"],
)
def test_a_hostile_build_record_is_one_data_error_naming_it(tmp_path, content):
    from drake_bench.benchmarks.store import BUILD_INFO, BuiltBenchmark
    from drake_bench.errors import DataNotBuiltError

    (tmp_path / BUILD_INFO).write_bytes(content)
    with pytest.raises(DataNotBuiltError) as err:
        BuiltBenchmark.open(tmp_path, "x")
    assert str(tmp_path / BUILD_INFO) in str(err.value) and "\n" not in str(err.value)
