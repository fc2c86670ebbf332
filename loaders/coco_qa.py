"""COCO-QA (Ren et al. 2015): parallel text files split by the native question type.

Format: ``<split>/questions.txt``, ``answers.txt``, ``img_ids.txt``, ``types.txt`` (one line per
question; types 0 object, 1 number, 2 color, 3 location); images are COCO 2014 files under
``images/`` named ``COCO_<train|val>2014_<id:012d>.jpg`` (or ``<id>.jpg``).
Checked: stored public COCO-QA loaders (COCO 2014 image naming ``COCO_train2014_000000475546.jpg``).
The four-file layout is the official release's [I].
Rule: ``types`` (list of ints), ``splits``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ..errors import SourceError
from ..sample import Sample
from ..spec import TaskSpec
from . import register_loader
from ._common import finish, make_sample, open_image, source_root

FILES = ("questions.txt", "answers.txt", "img_ids.txt", "types.txt")


def _lines(path: Path) -> list[str]:
    if not path.is_file():
        raise SourceError(f"{path}: file not found (COCO-QA needs {', '.join(FILES)} per split)")
    return path.read_text(encoding="utf-8").splitlines()


def _image(root: Path, img_id: int) -> Path:
    for name in (f"COCO_train2014_{img_id:012d}.jpg", f"COCO_val2014_{img_id:012d}.jpg", f"{img_id}.jpg"):
        if (root / "images" / name).is_file():
            return root / "images" / name
    raise SourceError(f"{root / 'images'}: no COCO image for id {img_id} (tried COCO_train2014_/COCO_val2014_ names and {img_id}.jpg)")


class COCOQALoader:
    name = "coco_qa"

    def load(self, task: TaskSpec, source_dir: Path | None) -> Iterator[Sample]:
        root = source_root(task, source_dir)
        wanted = set(task.source.rule["types"])
        out = []
        for split in task.source.rule.get("splits", ["train", "test"]):
            if not (root / split).is_dir():
                continue
            qs, ans, ids, types = (_lines(root / split / f) for f in FILES)
            if not len(qs) == len(ans) == len(ids) == len(types):
                raise SourceError(f"{root / split}: {', '.join(FILES)} have different line counts")
            for i, (q, a, img_id, t) in enumerate(zip(qs, ans, ids, types)):
                if int(t) not in wanted:
                    continue
                out.append(make_sample(task, f"{split}-{i}", q, a, images=[open_image(_image(root, int(img_id)))], meta={"type": int(t)}))
        yield from finish(task, out)


register_loader(COCOQALoader())
