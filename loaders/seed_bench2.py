"""SEED-Bench-2 (``AILab-CVC/SEED-Bench-2``): multiple-choice questions over images and video frames.

Format, as published (checked 2025-05 against the authors' repository ``AILab-CVC/SEED-Bench`` at
991e849: ``DATASET.md`` "Data Preparation for SEED-Bench-2" and ``SEED-Bench-2/eval.py``):

* ``SEED-Bench_v2_level1_2_3.json`` = ``{"questions": [...], "question_type": {name: id}}``; the map
  names the 27 dimensions exactly as ``"Instance Attributes": 3``, ``"Instances Counting": 5``,
  ``"Science Knowledge": 14``, ``"Action Recognition": 20`` ...;
* each question: ``question_id`` (``"<dimension>_<n>"``), ``question``, ``choice_a`` .. ``choice_d``,
  ``answer`` (a letter), ``question_type_id``, ``data_id``, ``data_source``, ``data_type``, ``level``,
  ``subpart``, ``version``;
* ``data_id`` is one image file name or a list of them (multi-image questions, and the 8 frames of a
  video question such as ``task19/Charades_test_frame/WRQ95/1.png`` .. ``8.png``), relative to the
  image folder that ``data_source`` picks: ``cc3m`` -> ``cc3m-image/`` (unpacked ``cc3m-image.zip``),
  ``SEED-Bench v2`` -> ``SEED-Bench-2-image/`` (unpacked ``SEED-Bench-2-image.zip.001`` ..).
  ``eval.py`` joins ``data_id`` to the folder as it is; DATASET.md's cc3m example
  (``"1454426_2591111986"``) carries no extension, so a file with ``.jpg``/``.png`` appended is also
  accepted. Some questions have an empty option (``''``): it is dropped from the choices.
The folder names inside the zips are taken from the zip names and a public evaluation harness
(``image/cc3m-image``, ``image/SEED-Bench-2-image``); both spellings are accepted.
Rule: ``annotation``, ``dimensions`` (names as in ``question_type``), ``image_dirs`` (data_source -> folder),
``max_frames`` (evenly spaced frames kept when a question has more).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from drake_bench.benchmarks.sample import Sample
from drake_bench.benchmarks.spec import TaskSpec
from drake_bench.errors import SourceError

from . import register_loader
from ._common import LETTERS, Need, field, finish, make_sample, open_image, read_json, root_name

_IMG_EXT = (".png", ".jpg", ".jpeg", ".webp", ".bmp")
IMAGE_DIRS = {"cc3m": "cc3m-image", "SEED-Bench v2": "SEED-Bench-2-image"}
DOWNLOAD = "huggingface.co/datasets/AILab-CVC/SEED-Bench-2 (SEED-Bench_v2_level1_2_3.json, cc3m-image.zip, SEED-Bench-2-image.zip.*)"


def _evenly(items: list[str], k: int) -> list[str]:
    if len(items) <= k:
        return items
    return [items[round(i * (len(items) - 1) / (k - 1))] for i in range(k)] if k > 1 else items[:1]


class SeedBench2Loader:
    name = "seed_bench2"
    unconfirmed = (
        "the folder names inside cc3m-image.zip / SEED-Bench-2-image.zip.* and the cc3m image file "
        "extension (DATASET.md lists data_id without one)",
    )

    def _dirs(self, task: TaskSpec) -> dict[str, str]:
        return {**IMAGE_DIRS, **task.source.rule.get("image_dirs", {})}

    def layout(self, task: TaskSpec) -> list[Need]:
        root = root_name(task)
        needs = [Need("SEED-Bench-2 questions", (f"{root}/{task.source.rule['annotation']}",), download=DOWNLOAD)]
        for source, folder in self._dirs(task).items():
            needs.append(
                Need(
                    f"SEED-Bench-2 images of data_source {source!r}",
                    (f"{root}/{folder}", f"{root}/image/{folder}"),
                    kind="images",
                    download=DOWNLOAD,
                )
            )
        return needs

    def load(self, task: TaskSpec, source_dir: Path | None) -> Iterator[Sample]:
        rule = task.source.rule
        needs = self.layout(task)
        path = needs[0].find_one(source_dir, task)
        data = read_json(path, "SEED-Bench-2 json {questions, question_type}")
        types = field(data, "question_type", path, "name -> question_type_id map")
        unknown = [d for d in rule["dimensions"] if d not in types]
        if unknown:
            raise SourceError(
                f"task {task.id!r}: {path}: question_type has no dimensions {unknown}; known: {sorted(types)}"
            )
        wanted = {int(types[d]) for d in rule["dimensions"]}
        questions = [
            q
            for q in field(data, "questions", path, "list of questions")
            if int(field(q, "question_type_id", path)) in wanted
        ]
        folders: dict[str, Path] = {}
        for (source, _), need in zip(self._dirs(task).items(), needs[1:]):
            if any(q.get("data_source") == source for q in questions):
                folders[source] = need.find_one(source_dir, task)
        max_frames = int(rule.get("max_frames", 8))
        out = []
        for q in questions:
            qid = str(field(q, "question_id", path))
            source = field(q, "data_source", path, "cc3m | SEED-Bench v2")
            if source not in folders:
                raise SourceError(
                    f"{path}: question {qid} has data_source {source!r}; known: {sorted(self._dirs(task))} (rule.image_dirs)"
                )
            base = folders[source]
            ref = field(q, "data_id", path)
            files = [
                self._resolve(base, r, max_frames, f"{path} question {qid}")
                for r in (ref if isinstance(ref, list) else [ref])
            ]
            files = _evenly([f for fs in files for f in fs], max_frames)
            raw = [str(field(q, f"choice_{c}", path)).strip() for c in "abcd"]
            letter = str(field(q, "answer", path)).strip().upper()
            if letter not in LETTERS[:4] or not raw[LETTERS.index(letter)]:
                raise SourceError(
                    f"{path}: question {qid} has answer {letter!r}, expected a letter A-D naming a non-empty choice"
                )
            choices = [c for c in raw if c]
            images = [open_image(f, f"{path} question {qid}") for f in files]
            out.append(
                make_sample(
                    task,
                    qid,
                    str(field(q, "question", path)),
                    raw[LETTERS.index(letter)],
                    images=images,
                    choices=choices,
                    meta={
                        "question_type_id": q["question_type_id"],
                        "data_type": q.get("data_type"),
                        "data_source": source,
                    },
                )
            )
        yield from finish(task, out)

    @staticmethod
    def _resolve(base: Path, ref: str, max_frames: int, where: str) -> list[Path]:
        p = base / ref
        if p.is_dir():  # SEED-Bench-1 style: a folder of frames
            return _evenly(sorted(f for f in p.iterdir() if f.suffix.lower() in _IMG_EXT), max_frames)  # type: ignore[arg-type]
        if p.is_file():
            return [p]
        for ext in (".jpg", ".png", ".jpeg"):
            if p.with_name(p.name + ext).is_file():
                return [p.with_name(p.name + ext)]
        raise SourceError(f"{where}: image {ref!r} not found under {base} (tried it as is and with .jpg/.png)")


register_loader(SeedBench2Loader())
