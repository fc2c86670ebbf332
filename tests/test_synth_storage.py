"""Storage encoding (the manifest's storage block): it changes the bytes on disk, never what a model sees."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from drake_bench.benchmarks.hub import shard_digest
from drake_bench.benchmarks.manifest import load_benchmark, manifest_dict, parse_manifest
from drake_bench.benchmarks.sample import AnswerType, Sample
from drake_bench.benchmarks.spec import StorageRule
from drake_bench.benchmarks.store import ARROW_CACHE, BuiltBenchmark, encode_image, shard_path, write_split
from drake_bench.benchmarks.synth.builder import build_synth
from drake_bench.errors import ManifestError

COMPACT = StorageRule(images="webp-lossless", parquet_compression="zstd")


def _pixels(image) -> np.ndarray:
    from io import BytesIO

    if isinstance(image, dict):
        image = Image.open(BytesIO(image["bytes"]))
    return np.asarray(image)


def test_default_storage_is_the_old_encoding_and_keeps_manifest_hashes():
    for name in ("drake", "hflb", "fed-llm-large", "drake-synth@1.4.0", "hflb-synth@1.3.0"):
        spec = load_benchmark(name)
        assert spec.storage == StorageRule()
        data = manifest_dict(spec)
        assert "storage" not in data and data["content_hash"] == spec.content_hash
    for name in ("drake-synth", "hflb-synth", "fedllm-synth"):
        assert load_benchmark(name).storage == COMPACT


def test_an_unknown_encoding_is_refused_naming_the_field():
    data = json.loads((Path(__file__).resolve().parents[1] / "splits" / "hflb-synth.json").read_text())
    data["storage"]["images"] = "jpeg"
    data.pop("content_hash")
    with pytest.raises(ManifestError, match=r"storage\.images: 'jpeg' is not one of"):
        parse_manifest(data, where="hflb-synth.json")


def test_webp_lossless_keeps_every_pixel_and_mode():
    rng = np.random.default_rng(0)
    rgb = Image.fromarray(rng.integers(0, 256, (17, 23, 3), dtype=np.uint8))
    rgba = Image.fromarray(rng.integers(0, 256, (9, 9, 4), dtype=np.uint8))  # transparent pixels keep their colour
    for im in (rgb, rgba):
        enc = encode_image(im, "webp-lossless")
        assert enc["bytes"][8:12] == b"WEBP"
        back = Image.open(__import__("io").BytesIO(enc["bytes"]))
        assert back.mode == im.mode and np.array_equal(np.asarray(back), np.asarray(im))
    gray = Image.new("L", (4, 4), 7)
    assert encode_image(gray, "webp-lossless") is gray  # WebP has no grey mode: left to datasets (PNG)
    raw = {"bytes": b"\x89PNG...", "path": None}
    assert encode_image(raw, "webp-lossless") is raw and encode_image(rgb, "png") is rgb  # source bytes as they are


def _samples(n: int = 6) -> list[Sample]:
    rng = np.random.default_rng(1)
    return [
        Sample(
            id=f"t/{i}",
            images=[Image.fromarray(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8))],
            question=f"q {i}",
            choices=["yes", "no"],
            answer="yes",
            answer_type=AnswerType.YES_NO,
            task_id="t",
            source="toy",
        )
        for i in range(n)
    ]


def test_compact_shards_read_back_identically_through_the_store(tmp_path):
    import pyarrow.parquet as pq

    from drake_bench.benchmarks.store import finalize_build

    samples = _samples()
    for name, storage in (("old", StorageRule()), ("new", COMPACT)):
        for split in ("train", "test"):
            write_split(tmp_path / name, "t", split, samples, storage)
        finalize_build(tmp_path / name, "toy", "sha256:x")
    meta = pq.ParquetFile(shard_path(tmp_path / "new", "t", "train")).metadata.row_group(0)
    assert {meta.column(i).compression for i in range(meta.num_columns)} == {"ZSTD"}
    old, new = (BuiltBenchmark.open(tmp_path / n) for n in ("old", "new"))
    a, b = old.samples("t", "train", range(6)), new.samples("t", "train", range(6))
    for x, y, s in zip(a, b, samples):
        assert (x.id, x.question, x.answer) == (y.id, y.question, y.answer) == (s.id, s.question, s.answer)
        assert np.array_equal(_pixels(x.images[0]), _pixels(y.images[0]))
        assert np.array_equal(_pixels(y.images[0]), np.asarray(s.images[0]))
    assert (
        shard_digest(shard_path(tmp_path / "old", "t", "train"))[1]
        == shard_digest(shard_path(tmp_path / "new", "t", "train"))[1]
    )


def test_new_versions_hold_the_same_content_in_fewer_bytes(tmp_path):
    """drake-synth 1.5.0 against 1.4.0: every task but the four image-quality ones (redesigned: a new generator
    version is a new draw) has the same content digest (ids, text, decoded pixels), in smaller shards."""
    tasks = ["rel-spatial", "rsn-common-color", "vqa-bar-chart", "un-recipe-order", "vqa-quality-pair"]
    old = build_synth("drake-synth@1.4.0", scale=0.2, out=tmp_path / "old", tasks=tasks)
    new = build_synth("drake-synth@1.5.0", scale=0.2, out=tmp_path / "new", tasks=tasks)
    for t in tasks:
        for split in ("train", "test"):
            po, pn = shard_path(old, t, split), shard_path(new, t, split)
            assert pn.stat().st_size < po.stat().st_size, (t, split)
            assert (shard_digest(po) == shard_digest(pn)) == (t != "vqa-quality-pair"), (t, split)
    redesigned = {t.id for t in load_benchmark("drake-synth@1.5.0").tasks if t.source.rule["generator_version"] == 5}
    assert redesigned == {"vqa-quality-pair", "vqa-quality-triple", "vqa-quality-yesno", "vqa-distortion-type"}


def _same_in_2x2_cells(image) -> float:
    """Share of 2x2 pixel cells whose four pixels are equal: ~0 under per-pixel colour noise, high under grain
    (the background is one colour, so grain leaves whole cells equal)."""
    a = _pixels(image).astype(int)
    eq = ((a[::2, ::2] == a[1::2, ::2]) & (a[::2, ::2] == a[::2, 1::2]) & (a[::2, ::2] == a[1::2, 1::2])).all(axis=2)
    return float(eq.mean())


def test_grain_noise_is_monochrome_on_2x2_cells():
    from drake_bench.benchmarks.synth.render import distort

    base = np.array([128, 120, 110])
    clean = Image.new("RGB", (64, 64), tuple(int(v) for v in base))
    colour, grain = (np.asarray(distort(clean, "noise", seed=3, grain=g)).astype(int) for g in (1, 2))
    shift, inside = grain - base, ((grain > 0) & (grain < 255)).all(axis=2)  # where no channel was clipped
    assert inside.mean() > 0.9 and (shift[inside] == shift[inside][:, :1]).all()  # one shift for R, G and B: luma
    cells = inside[::2, ::2] & inside[1::2, ::2] & inside[::2, 1::2] & inside[1::2, 1::2]
    for dy, dx in ((0, 1), (1, 0), (1, 1)):
        assert (shift[dy::2, dx::2, 0][cells] == shift[::2, ::2, 0][cells]).all()  # constant on 2x2 cells
    assert (colour[..., 0] != colour[..., 1]).mean() > 0.9  # version 3: per-pixel colour noise
    assert shift[inside].std() > 40 and (colour - base).std() > 40  # as strong as before


@pytest.mark.parametrize("version,grainy", [("drake-synth@1.4.0", False), ("drake-synth", True)])
def test_noisy_quality_images_have_grain_from_generator_version_5(version, grainy):
    from drake_bench.benchmarks.synth.loader import fresh_items

    noisy = [
        s.images[0]
        for s in fresh_items(load_benchmark(version).task("vqa-distortion-type"), 40, seed=4)
        if s.answer == "noise"
    ]
    assert len(noisy) >= 4
    shares = [_same_in_2x2_cells(im) for im in noisy]
    assert (min(shares) > 0.3) if grainy else (max(shares) < 0.05), shares


@pytest.mark.parametrize(
    "old_name,new_name,task",
    [
        ("hflb-synth@1.3.0", "hflb-synth@1.4.0", "hflb-c1-attribute"),
        ("fedllm-synth@1.3.0", "fedllm-synth@1.5.0", "c01-flan-reverse"),
    ],
)
def test_hflb_and_fedllm_synth_changed_only_their_encoding(tmp_path, old_name, new_name, task):
    old = build_synth(old_name, scale=0.2, out=tmp_path / "old", tasks=[task])
    new = build_synth(new_name, scale=0.2, out=tmp_path / "new", tasks=[task])
    for split in ("train", "test"):
        assert shard_digest(shard_path(old, task, split)) == shard_digest(shard_path(new, task, split))


def test_the_validation_split_version_keeps_the_test_items_and_carves_validation_off_training(tmp_path):
    """hflb-synth 1.5.0 against 1.4.0: the same test shard content, and its train + validation items are 1.4.0's
    training items."""
    task = "hflb-c1-attribute"
    old = BuiltBenchmark.open(build_synth("hflb-synth@1.4.0", scale=0.2, out=tmp_path / "old", tasks=[task]))
    new = BuiltBenchmark.open(build_synth("hflb-synth", scale=0.2, out=tmp_path / "new", tasks=[task]))
    assert shard_digest(shard_path(old.root, task, "test")) == shard_digest(shard_path(new.root, task, "test"))

    def ids(store, split):
        return {s.id for s in store.samples(task, split, range(store.size(task, split)))}

    assert ids(new, "train") | ids(new, "validation") == ids(old, "train")
    assert ids(new, "validation") and not ids(new, "train") & ids(new, "validation")


def test_a_rebuild_drops_the_stale_arrow_cache(tmp_path):
    root = build_synth("hflb-synth", scale=0.1, out=tmp_path / "b", tasks=["hflb-c1-attribute"])
    BuiltBenchmark.open(root).samples("hflb-c1-attribute", "train", [0])
    assert any((root / ARROW_CACHE).iterdir())
    build_synth("hflb-synth", scale=0.2, out=root, tasks=["hflb-c1-attribute"])
    assert not (root / ARROW_CACHE).exists()
    assert len(BuiltBenchmark.open(root).samples("hflb-c1-attribute", "train", [0, 1])) == 2


def test_compact_shards_load_with_datasets_as_the_hub_serves_them(tmp_path, monkeypatch):
    """What a user of the Hub copy does: `datasets.load_dataset(repo, task)` on WebP + zstd shards."""
    import datasets

    from drake_bench.benchmarks.card import CARD_FILE

    root = build_synth("hflb-synth", scale=0.1, out=tmp_path / "b", tasks=["hflb-c1-attribute"])
    assert "storage: images `webp-lossless`, Parquet `zstd`" in (root / CARD_FILE).read_text()
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "ds"))
    ds = datasets.load_dataset(str(root), "hflb-c1-attribute", split="test", cache_dir=str(tmp_path / "ds"))
    ours = BuiltBenchmark.open(root).samples("hflb-c1-attribute", "test", range(len(ds)))
    assert ds.features["images"].feature.__class__.__name__ == "Image"
    for row, s in zip(ds, ours):
        assert row["id"] == s.id and np.array_equal(np.asarray(row["images"][0]), _pixels(s.images[0]))
