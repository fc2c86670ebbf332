"""SEED-Bench-2 (``AILab-CVC/SEED-Bench-2``): multiple-choice questions over images and video frames.

Format: ``SEED-Bench_v2_level1_2_3.json`` = ``{"questions": [...], "question_type": {name: id}}``;
each question has ``question_id``, ``question``, ``choice_a`` .. ``choice_d``, ``answer`` (a letter),
``question_type_id``, ``data_id`` (an image file, a list of files, or a folder of frames, relative
to ``rule.image_root``, default the repo root) and ``data_type``.
Checked: stored public evaluation code (``benchmark["questions"]``, ``x['data_type']``) and the
lmms-lab/SEED-Bench card fields (``choice_a``..``choice_d``, ``answer`` letter); the
``question_type`` name->id map follows SEED-Bench v1's released json [I].
Rule: ``annotation``, ``dimensions`` (names, mapped through ``question_type``), ``max_frames``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ..errors import SourceError
from ..sample import Sample
from ..spec import TaskSpec
from . import register_loader
from ._common import LETTERS, field, finish, image_from_value, make_sample, read_json, source_root

_IMG_EXT = (".png", ".jpg", ".jpeg", ".webp", ".bmp")


class SeedBench2Loader:
    name = "seed_bench2"

    def load(self, task: TaskSpec, source_dir: Path | None) -> Iterator[Sample]:
        rule = task.source.rule
        root = source_root(task, source_dir)
        path = root / rule["annotation"]
        data = read_json(path, "SEED-Bench-2 json {questions, question_type}")
        types = field(data, "question_type", path, "name -> question_type_id map")
        unknown = [d for d in rule["dimensions"] if d not in types]
        if unknown:
            raise SourceError(f"{path}: question_type has no dimensions {unknown}; known: {sorted(types)}")
        wanted = {int(types[d]) for d in rule["dimensions"]}
        img_root = root / rule.get("image_root", "")
        max_frames = int(rule.get("max_frames", 8))
        out = []
        for q in field(data, "questions", path, "list of questions"):
            if int(field(q, "question_type_id", path)) not in wanted:
                continue
            ref = field(q, "data_id", path)
            refs = ref if isinstance(ref, list) else [ref]
            files: list[str] = []
            for r in refs:
                p = img_root / r
                if p.is_dir():
                    frames = sorted(str(f.relative_to(img_root)) for f in p.iterdir() if f.suffix.lower() in _IMG_EXT)
                    if len(frames) > max_frames:  # evenly spaced frames
                        frames = [frames[round(i * (len(frames) - 1) / (max_frames - 1))] for i in range(max_frames)]
                    files.extend(frames)
                else:
                    files.append(r)
            choices = [str(field(q, f"choice_{c}", path)) for c in "abcd"]
            letter = str(field(q, "answer", path)).strip().upper()
            if letter not in LETTERS[:4]:
                raise SourceError(f"{path}: question {q.get('question_id')!r} has answer {letter!r}, expected A-D")
            images = [image_from_value(f, img_root, str(path)) for f in files]
            out.append(make_sample(task, str(field(q, "question_id", path)), str(field(q, "question", path)),
                                   choices[LETTERS.index(letter)], images=images, choices=choices,
                                   meta={"question_type_id": q["question_type_id"], "data_type": q.get("data_type")}))
        yield from finish(task, out)


register_loader(SeedBench2Loader())
