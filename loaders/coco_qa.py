"""COCO-QA (Ren et al. 2015): parallel text files split by the native question type.

Format: ``<split>/questions.txt``, ``answers.txt``, ``img_ids.txt``, ``types.txt`` (one line per
question; types 0 object, 1 number, 2 color, 3 location); images are COCO 2014 files under
``images/`` named ``COCO_<train|val>2014_<id:012d>.jpg`` (or ``<id>.jpg``).
Checked: stored public COCO-QA loaders (COCO 2014 image naming ``COCO_train2014_000000475546.jpg``).
Not confirmed: the four-file layout (the official release page was not in the stored sources; the build warns).
Rule: ``types`` (list of ints), ``splits``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from drake_bench.benchmarks.sample import Sample
from drake_bench.benchmarks.spec import TaskSpec
from drake_bench.errors import SourceError

from . import register_loader
from ._common import Need, finish, make_sample, open_image, read_lines, root_name, source_root

FILES = ("questions.txt", "answers.txt", "img_ids.txt", "types.txt")


def _lines(path: Path) -> list[str]:
    if not path.is_file():
        raise SourceError(f"{path}: file not found (COCO-QA needs {', '.join(FILES)} per split)")
    return read_lines(path, "COCO-QA lines")


def _image(root: Path, img_id: int) -> Path:
    for name in (f"COCO_train2014_{img_id:012d}.jpg", f"COCO_val2014_{img_id:012d}.jpg", f"{img_id}.jpg"):
        if (root / "images" / name).is_file():
            return root / "images" / name
    raise SourceError(
        f"{root / 'images'}: no COCO image for id {img_id} (tried COCO_train2014_/COCO_val2014_ names and {img_id}.jpg)"
    )


DOWNLOAD = "www.cs.toronto.edu/~mren/research/imageqa/data/cocoqa/ (cocoqa-2015-05-17.zip) and COCO 2014 images (cocodataset.org)"


class COCOQALoader:
    name = "coco_qa"
    unconfirmed = (
        "COCO-QA's four-file-per-split layout and the images/ folder (the release page is not in the stored sources)",
    )

    def layout(self, task: TaskSpec) -> list[Need]:
        root = root_name(task)
        return [
            *(
                Need(f"COCO-QA {s} {f}", (f"{root}/{s}/{f}",), required=False, download=DOWNLOAD)
                for s in task.source.rule.get("splits", ["train", "test"])
                for f in FILES
            ),
            Need("COCO 2014 images", (f"{root}/images",), kind="images", download=DOWNLOAD),
        ]

    def load(self, task: TaskSpec, source_dir: Path | None) -> Iterator[Sample]:
        root = source_root(task, source_dir)
        wanted = set(task.source.rule["types"])
        out = []
        splits = [s for s in task.source.rule.get("splits", ["train", "test"]) if (root / s).is_dir()]
        if not splits:
            raise SourceError(
                f"task {task.id!r}: no COCO-QA split folder ({', '.join(task.source.rule.get('splits', ['train', 'test']))}) "
                f"under {root}; each holds {', '.join(FILES)} ({DOWNLOAD})"
            )
        for split in splits:
            qs, ans, ids, types = (_lines(root / split / f) for f in FILES)
            if not len(qs) == len(ans) == len(ids) == len(types):
                raise SourceError(f"{root / split}: {', '.join(FILES)} have different line counts")
            for i, (q, a, img_id, t) in enumerate(zip(qs, ans, ids, types)):
                if int(t) not in wanted:
                    continue
                out.append(
                    make_sample(
                        task,
                        f"{split}-{i}",
                        q,
                        a,
                        images=[open_image(_image(root, int(img_id)))],
                        meta={"type": int(t)},
                    )
                )
        yield from finish(task, out)


register_loader(COCOQALoader())
