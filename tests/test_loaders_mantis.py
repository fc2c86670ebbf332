"""Mantis-Instruct (issue 32, problem 8): image paths are relative to the unpacked ``<split>_images`` archive.

Fixture format: TIGER-AI-Lab/Mantis@f3a3192 data/upload_conv_dataset_to_hf.py (Parquet rows {id, images: [{bytes, path}],
conversation: [{role, content}], source}; ``<config>/<split>_images.zip`` members written ``relative_to(image_dir)``, the
same string stored as ``images[].path``) and data/mantis-instruct-hf-module.py (unpacks every ``<split>_images*.zip`` into
``<config>/<split>_images/`` and joins each ``path`` to it). Rows are made up.
"""

from __future__ import annotations

import pytest
from fixtures_real import parquet, png

from drake_bench.benchmarks.manifest import load_benchmark
from drake_bench.errors import SourceError
from drake_bench.loaders import get_loader


def _rows(n: int, split: str) -> list[dict]:
    return [
        {
            "id": f"{split}-{i}",
            "images": [{"bytes": None, "path": f"nights/{i:03d}/{k}.png"} for k in range(3)],
            "conversation": [
                {
                    "role": "user",
                    "content": "<image><image><image>Which image is closer to the first?\nA. second\nB. third",
                },
                {"role": "assistant", "content": "A"},
            ],
            "source": "dreamsim",
        }
        for i in range(n)
    ]


def test_mantis_images_come_from_the_unpacked_split_archive(tmp_path) -> None:
    spec = load_benchmark("drake")
    folder = tmp_path / "Mantis-Instruct" / "dreamsim"
    for split, n in (("train", 3), ("val", 2)):
        rows = _rows(n, split)
        parquet(folder / f"{split}-00000-of-00001.parquet", rows)
        for r in rows:
            for im in r["images"]:
                png(folder / f"{split}_images" / im["path"])
    items = list(get_loader("llava_conversation").load(spec.task("dreamsim"), tmp_path))
    assert len(items) == 5 and all(
        len(s.images) == 3 and s.answer == "second" and s.choices == ["second", "third"] for s in items
    )


def test_mantis_unpacked_elsewhere_names_the_expected_path(tmp_path) -> None:
    spec = load_benchmark("drake")
    folder = tmp_path / "Mantis-Instruct" / "dreamsim"
    parquet(folder / "train-00000-of-00001.parquet", _rows(1, "train"))
    with pytest.raises(SourceError, match="train_images"):
        list(get_loader("llava_conversation").load(spec.task("dreamsim"), tmp_path))
