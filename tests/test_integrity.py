"""What a run reads is what was built: shards are checked against build_info.json on first open (cached by
size and times), datasets' decoded copy is the verified shard's, and unreadable shards are data errors naming
the file, never a plugin's fault."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from minimal_method import Counter

from drake_bench.benchmarks import store
from drake_bench.benchmarks.build import build_benchmark
from drake_bench.benchmarks.store import ARROW_CACHE, BUILD_INFO, BuiltBenchmark, data_hash, file_sha256, shard_path
from drake_bench.errors import DataError, DataIntegrityError, DrakeBenchError, IntegrityError, PluginError
from drake_bench.plugins.guard import GuardedMethod
from drake_bench.streams.stream import load_client_stream, load_federated_data

SHARD = ("c1-t0", "train")  # a shard client 1 trains on from round 0 (dynamic: its first task)


@pytest.fixture
def copy(toy_built, tmp_path) -> tuple:
    """A private copy of the toy build (tests tamper with it), as a fresh build leaves it."""
    spec, root = toy_built
    out = tmp_path / "built"
    shutil.copytree(root, out, ignore=shutil.ignore_patterns(ARROW_CACHE, ".verified.json"))
    return spec, out


def _rel(task: str, split: str) -> str:
    return f"data/{task}/{split}-00000-of-00001.parquet"


def _answers_to_42(path: Path) -> None:
    """A valid Parquet shard, same schema and rows, every answer rewritten to "42"."""
    table = pq.read_table(path)
    i = table.schema.get_field_index("answer")
    table = table.set_column(i, table.schema.field(i), pa.array(["42"] * table.num_rows, pa.string()))
    pq.write_table(table, path)


def _flip_one_bit(path: Path) -> None:
    """One bit flipped in the middle of the file, size and mtime kept (what a bad disk or `touch -r` leaves)."""
    st = os.stat(path)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def _train(stream) -> list:
    return [s for _r, batches in stream.rounds() for batch in batches for s in batch]


def _read_all(spec, root) -> None:
    """What a run does with client 1's data: its stream, then test items."""
    _train(load_client_stream(spec, 1, "dynamic", data_dir=root))
    load_federated_data(spec, "dynamic", 0, data_dir=root).test_samples("c1-t0")


# -------------------------------------------------------------------------- tampered shards are refused
@pytest.mark.parametrize("tamper", [_answers_to_42, _flip_one_bit], ids=["answers-rewritten", "one-bit-flipped"])
def test_a_tampered_shard_is_refused_through_data_dir(copy, tamper):
    spec, root = copy
    _read_all(spec, root)  # verified once: the cache now holds its size and times
    path = shard_path(root, *SHARD)
    expected = json.loads((root / BUILD_INFO).read_text())["files"][_rel(*SHARD)]
    tamper(path)
    with pytest.raises(DataIntegrityError) as err:
        _read_all(spec, root)
    text = str(err.value)
    assert str(path) in text and expected in text and file_sha256(path) in text
    assert "drake-bench build toy --task c1-t0 --no-resume" in text


def test_a_tampered_shard_is_refused_in_the_default_cache(toy_loader, tmp_path, monkeypatch):
    from conftest import toy_spec

    monkeypatch.setenv("DRAKE_BENCH_HOME", str(tmp_path / "home"))
    spec = toy_spec(n_clients=2, tasks_per_client=2, pool_size=10)
    root = build_benchmark(spec, show_progress=False)
    assert root == tmp_path / "home" / "built" / "toy"
    assert len(_train(load_client_stream(spec, 1, "dynamic")))  # no data_dir: the default location
    _answers_to_42(shard_path(root, *SHARD))
    with pytest.raises(DataIntegrityError, match=r"c1-t0/train-00000-of-00001\.parquet: sha256 \w+ does not match"):
        _train(load_client_stream(spec, 1, "dynamic"))


def test_a_truncated_shard_is_a_data_error_naming_the_file_not_a_plugin_error(copy):
    spec, root = copy
    path = shard_path(root, *SHARD)
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(DataIntegrityError, match=str(path)):
        _train(load_client_stream(spec, 1, "dynamic", data_dir=root))
    # the same file recorded as built (hashes consistent): still the data's fault, named, not a PluginError
    info = json.loads((root / BUILD_INFO).read_text())
    info["files"][_rel(*SHARD)] = file_sha256(path)
    info["data_hash"] = data_hash(info["files"])
    (root / BUILD_INFO).write_text(json.dumps(info))
    with pytest.raises(DataError, match=str(path)) as err:
        _train(load_client_stream(spec, 1, "dynamic", data_dir=root))
    assert not isinstance(err.value, PluginError)


def test_a_data_error_inside_a_method_call_is_not_blamed_on_the_plugin(copy):
    """The stream may decode lazily inside client_update: the guard lets the data error through as it is."""
    spec, root = copy
    shard_path(root, *SHARD).write_bytes(b"PAR1 not a shard")
    guarded = GuardedMethod(Counter(), seed=0)
    with pytest.raises(DataIntegrityError, match="c1-t0/train"):
        guarded.call("client_update", lambda: BuiltBenchmark.open(root).samples(*SHARD, [0]), client=1, round_idx=0)


def test_an_edited_build_info_cannot_keep_citing_the_original_data_hash(copy):
    """Recording the tampered shard's hash while keeping data_hash would make results cite the clean data."""
    spec, root = copy
    path = shard_path(root, *SHARD)
    _answers_to_42(path)
    info = json.loads((root / BUILD_INFO).read_text())
    info["files"][_rel(*SHARD)] = file_sha256(path)
    (root / BUILD_INFO).write_text(json.dumps(info))
    with pytest.raises(DataIntegrityError, match="data_hash .* is not the hash of the recorded shard hashes"):
        BuiltBenchmark.open(root)


def _reencoded(path: Path) -> None:
    """The same rows written as other library versions write them: images re-encoded losslessly as PNG (the shards
    hold WebP), Parquet with snappy instead of zstd. Every byte moves; nothing a reader sees does."""
    import io

    from PIL import Image

    table = pq.read_table(path)
    rows = table.to_pylist()
    for row in rows:
        for img in row["images"] or []:
            out = io.BytesIO()
            Image.open(io.BytesIO(img["bytes"])).save(out, format="PNG")
            img["bytes"] = out.getvalue()
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), path, compression="snappy")


def _refinalize(root: Path) -> dict:
    info = json.loads((root / BUILD_INFO).read_text())
    own = {"benchmark", "manifest_hash", "data_hash", "files", "content_hash", "content_digests", "sizes"}
    return store.finalize_build(
        root, info["benchmark"], info["manifest_hash"], {k: v for k, v in info.items() if k not in own}
    )


def test_the_content_hash_is_the_data_as_read_not_the_bytes_that_hold_it(copy, monkeypatch):
    """Re-encoded shards (what another pyarrow or Pillow writes) get another data hash and the same content hash;
    changed answers get another content hash. A shard kept from the last build is not decoded again."""
    spec, root = copy
    before = json.loads((root / BUILD_INFO).read_text())
    assert before["content_hash"] == store.content_hash(before["content_digests"])
    assert set(before["content_digests"]) == set(before["files"])

    calls: list[Path] = []
    real = store.content_digest
    monkeypatch.setattr(store, "content_digest", lambda p: (calls.append(Path(p)), real(p))[1])
    assert _refinalize(root)["content_hash"] == before["content_hash"]
    assert len(calls) == len(before["content_digests"])  # the copy came without the cache: nothing vouched for
    calls.clear()
    assert _refinalize(root)["content_hash"] == before["content_hash"] and calls == []  # nothing changed

    path = shard_path(root, *SHARD)
    _reencoded(path)
    moved = _refinalize(root)
    assert calls == [path]  # only the rewritten shard was decoded
    assert moved["data_hash"] != before["data_hash"] and moved["files"][_rel(*SHARD)] != before["files"][_rel(*SHARD)]
    assert moved["content_hash"] == before["content_hash"]
    reread = BuiltBenchmark.open(root)
    assert (reread.content_hash, reread.data_hash) == (before["content_hash"], moved["data_hash"])

    _answers_to_42(path)
    assert _refinalize(root)["content_hash"] != before["content_hash"]


def test_an_edited_build_info_cannot_keep_citing_the_original_content_hash(copy):
    """Another shard's digest recorded under the original content hash, or a shard left without a digest, is refused
    at open, as an edited data hash is."""
    spec, root = copy
    info = json.loads((root / BUILD_INFO).read_text())
    info["content_digests"][_rel(*SHARD)] = "sha256:" + "0" * 64
    (root / BUILD_INFO).write_text(json.dumps(info))
    with pytest.raises(DataIntegrityError, match="content_hash .* is not the hash of the recorded content digests"):
        BuiltBenchmark.open(root)
    del info["content_digests"][_rel(*SHARD)]
    info["content_hash"] = store.content_hash(info["content_digests"])
    (root / BUILD_INFO).write_text(json.dumps(info))
    with pytest.raises(DataIntegrityError, match="no content digest for"):
        BuiltBenchmark.open(root)


def _forge_answers(root: Path) -> None:
    """Every answer of SHARD rewritten, its file hash and the data hash recorded to match, its content digest and
    the content hash left as built: an edited shard dressed as the board's data by its content hash."""
    _answers_to_42(shard_path(root, *SHARD))
    info = json.loads((root / BUILD_INFO).read_text())
    info["files"][_rel(*SHARD)] = file_sha256(shard_path(root, *SHARD))
    info["data_hash"] = data_hash(info["files"])
    (root / BUILD_INFO).write_text(json.dumps(info))


def test_a_content_digest_that_is_not_the_shards_is_refused_at_first_read(copy):
    spec, root = copy
    _forge_answers(root)
    bench = BuiltBenchmark.open(root)  # every recorded hash is consistent with the others
    with pytest.raises(DataIntegrityError, match=f"{shard_path(root, *SHARD)}: its content digest is .* was edited"):
        bench.samples(*SHARD, [0])


def test_reads_of_a_fresh_build_do_not_decode_for_the_content_check(copy, monkeypatch):
    """A build seeds the cache with the digests it computed; data from elsewhere is decoded once per shard."""
    spec, root = copy
    calls: list[Path] = []
    real = store.content_digest
    monkeypatch.setattr(store, "content_digest", lambda p: (calls.append(Path(p)), real(p))[1])
    BuiltBenchmark.open(root).samples(*SHARD, [0])
    assert calls == [shard_path(root, *SHARD)]  # the copy came without the cache
    BuiltBenchmark.open(root).samples(*SHARD, [0])
    assert len(calls) == 1
    _refinalize(root)
    calls.clear()
    BuiltBenchmark.open(root).samples(*SHARD, [0])
    assert calls == []


def test_a_build_keeps_only_digests_drake_bench_computed_or_checked(copy):
    """A digest written into build_info.json by hand is not carried into the next build's content hash."""
    spec, root = copy
    honest = _refinalize(root)  # computes every digest and seeds the cache
    _forge_answers(root)
    info = json.loads((root / BUILD_INFO).read_text())
    assert info["content_digests"] == honest["content_digests"]  # the forged file still cites the honest digests
    rebuilt = _refinalize(root)
    assert rebuilt["content_digests"][_rel(*SHARD)] == store.content_digest(shard_path(root, *SHARD))
    assert rebuilt["content_hash"] != honest["content_hash"]


def test_data_integrity_errors_are_integrity_and_data_errors():
    assert issubclass(DataIntegrityError, IntegrityError) and issubclass(DataIntegrityError, DataError)
    assert issubclass(DataError, DrakeBenchError)


# -------------------------------------------------------------------------- the cache
def test_a_second_open_rehashes_no_unchanged_training_shard_and_every_test_shard(copy, monkeypatch):
    """Training shards are hashed once while unchanged (the cache); test shards, which decide scores, on every open."""
    spec, root = copy
    calls: list[Path] = []
    real = store.file_sha256
    monkeypatch.setattr(store, "file_sha256", lambda p: (calls.append(Path(p)), real(p))[1])

    def hashed(split: str) -> list[Path]:
        return [c for c in calls if c.name.startswith(f"{split}-")]

    _read_all(spec, root)
    first_train, first_test = len(hashed("train")), len(hashed("test"))
    assert first_train >= 2 and first_test >= 1  # the copy came without the cache: its shards were hashed
    _read_all(spec, root)
    assert len(hashed("train")) == first_train  # unchanged: size and times match the cache
    assert len(hashed("test")) == 2 * first_test  # hashed again
    os.utime(shard_path(root, *SHARD))  # touched (mtime moves): hashed again, and still fine
    _read_all(spec, root)
    assert hashed("train")[first_train:] == [shard_path(root, *SHARD)]


def test_a_fresh_build_seeds_the_cache(toy_loader, tmp_path, monkeypatch):
    from conftest import toy_spec

    spec = toy_spec(n_clients=2, tasks_per_client=2, pool_size=10)
    root = build_benchmark(spec, out=tmp_path / "b", show_progress=False)
    calls: list[Path] = []
    monkeypatch.setattr(store, "file_sha256", lambda p: calls.append(p) or "")
    _train(load_client_stream(spec, 1, "dynamic", data_dir=root))
    assert calls == []


def test_verified_files_are_the_shards_read_with_their_hashes(copy):
    spec, root = copy
    fed = load_federated_data(spec, "dynamic", 0, data_dir=root)
    recorded = fed.store.info["files"]
    fed.test_samples("c2-t1")
    fed.train_samples("unseen-0", limit=2)
    assert fed.store.verified_files == {r: recorded[r] for r in (_rel("c2-t1", "test"), _rel("unseen-0", "train"))}


def test_an_edited_decoded_copy_is_made_again_from_the_verified_shard(copy):
    """datasets reads rows from its Arrow copy, not the shard: an edited copy must not be read."""
    spec, root = copy
    before = [s.answer for s in BuiltBenchmark.open(root).samples(*SHARD, range(4))]
    arrow = next((root / ARROW_CACHE).rglob("*.arrow"))
    table = pa.ipc.open_stream(arrow.read_bytes()).read_all()
    i = table.schema.get_field_index("answer")
    table = table.set_column(i, table.schema.field(i), pa.array(["42"] * table.num_rows, pa.string()))
    with pa.OSFile(str(arrow), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    assert [s.answer for s in BuiltBenchmark.open(root).samples(*SHARD, range(4))] == before


def test_a_test_split_is_read_from_its_shard_even_when_its_decoded_copy_and_record_are_edited_together(copy):
    """The poisoning attack: a test answer edited in the decoded copy and the copy's stat key rewritten in
    .verified.json (shards and build_info.json untouched) made every later run score "42" as right. Test splits are
    hashed and decoded afresh on every open, so what is scored is the verified shard's."""
    from drake_bench.benchmarks.store import _VerifiedCache

    spec, root = copy
    task = ("c1-t0", "test")
    before = [s.answer for s in BuiltBenchmark.open(root).samples(*task, range(4))]
    built = BuiltBenchmark.open(root)
    rel = _rel(*task)
    sha = built.verify_file(rel)
    ds = built._open_arrow(rel, root / rel, sha)  # the shared decoded copy, as every test split had one before
    files = [Path(f["filename"]) for f in ds.cache_files]
    del ds
    table = pa.ipc.open_stream(files[0].read_bytes()).read_all()
    i = table.schema.get_field_index("answer")
    table = table.set_column(i, table.schema.field(i), pa.array(["42"] * table.num_rows, pa.string()))
    with pa.OSFile(str(files[0]), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    stats = {os.path.relpath(f, root): store._stat_key(f) for f in files}
    _VerifiedCache(root).update(arrow={rel: {"sha256": sha, "files": stats}})  # the record rewritten to match
    assert [s.answer for s in BuiltBenchmark.open(root).samples(*task, range(4))] == before != ["42"] * 4
    import gc

    gc.collect()
    assert not list((root / ARROW_CACHE).glob("fresh-*"))  # a fresh copy goes with its table


# -------------------------------------------------------------------------- checkpoints a user can act on
def _saved(run_dir: Path) -> Path:
    import torch

    from drake_bench.evaluator import checkpoint
    from drake_bench.plugins.protocol import Message, State

    checkpoint.save(
        run_dir,
        checkpoint.RunProgress(
            completed_rounds=2,
            clients={1: State(tensors={"w": torch.ones(2)}), 2: State(tensors={"w": torch.zeros(2)})},
            server=State(metadata={"r": 2}),
            messages={1: Message(tensors={"m": torch.ones(1)}), 2: None},
            records={"scores": [], "costs": []},
            extra={"fingerprint": "f"},
        ),
    )
    return run_dir


def test_a_truncated_progress_file_is_explained_with_the_way_out(tmp_path):
    from drake_bench.errors import CheckpointError
    from drake_bench.evaluator import checkpoint

    run_dir = _saved(tmp_path / "seed-0")
    assert checkpoint.load(run_dir).completed_rounds == 2
    progress = run_dir / checkpoint.PROGRESS
    progress.write_text(progress.read_text()[:25])
    with pytest.raises(CheckpointError) as err:
        checkpoint.load(run_dir)
    text = str(err.value)
    assert str(progress) in text and "not valid JSON" in text and "--no-resume" in text and "resume=False" in text


def test_a_missing_round_folder_or_state_is_explained_with_the_way_out(tmp_path):
    from drake_bench.errors import CheckpointError
    from drake_bench.evaluator import checkpoint

    run_dir = _saved(tmp_path / "seed-0")
    (run_dir / "round-0002" / "client-2.safetensors").write_bytes(b"\0" * 7)
    with pytest.raises(CheckpointError, match=r"client 2's state .*client-2\.safetensors cannot be read.*--no-resume"):
        checkpoint.load(run_dir)
    shutil.rmtree(run_dir / "round-0002")
    with pytest.raises(
        CheckpointError, match=r"round folder .*round-0002 that .*progress\.json names is missing.*--no-resume"
    ):
        checkpoint.load(run_dir)
