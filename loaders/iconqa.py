"""IconQA (Lu et al. 2021), read from its original release, split by question type and grade level.

Format, as published (checked 2025-05 against the authors' repository ``lupantech/IconQA`` at 4b053f3:
README "data" tree, ``run_choose_txt/dataset.py``, ``run_fill_in_blank/dataset.py``,
``tools/create_ans_label.py`` and ``tools/generate_img_patch_feature.py``): ``iconqa_data.zip`` unpacks to
``iconqa_data/`` holding

* ``problems.json`` = ``{pid: {question, choices, answer, ques_type, grade, ...}}`` (``answer`` is an
  option index for ``choose_txt``, the answer text for ``fill_in_blank``);
* ``pid_splits.json`` = ``{"<ques_type>_<split>": [pid, ...]}`` with split ``train``, ``val``, ``test``
  and also the derived lists ``trainval``, ``minitrain``, ``minival``, ``minitest`` (subsets/unions of
  the first three, so the same pid appears under several keys);
* images at ``iconqa/<split>/<ques_type>/<pid>/image.png`` for the three real splits only.

Only ``<ques_type>_{train,val,test}`` (rule ``splits``) are read, and each pid once.
The ``grade`` values (``kindergarten``, ``grade1`` ...) are not shown in the repository: not confirmed.
Rule (partition): ``ques_type``, ``grades``, ``splits``; local root ``<source_dir>/iconqa_data``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from drake_bench.benchmarks.sample import Sample
from drake_bench.benchmarks.spec import TaskSpec
from drake_bench.errors import SourceError

from . import register_loader
from ._common import Need, field, finish, make_sample, open_image, read_json

ROOT = "iconqa_data"
SPLITS = ("train", "val", "test")
DOWNLOAD = "https://iconqa2021.s3.us-west-1.amazonaws.com/iconqa_data.zip (unzip into the source folder)"


class IconQALoader:
    name = "iconqa"
    unconfirmed = ("the grade values in problems.json (kindergarten, grade1, ...) that the Easy/Hard tasks select",)

    def layout(self, task: TaskSpec) -> list[Need]:
        return [
            Need("IconQA problems", (f"{ROOT}/problems.json",), download=DOWNLOAD),
            Need("IconQA pid splits", (f"{ROOT}/pid_splits.json",), download=DOWNLOAD),
            Need("IconQA images", (f"{ROOT}/iconqa",), kind="images", download=DOWNLOAD),
        ]

    def load(self, task: TaskSpec, source_dir: Path | None) -> Iterator[Sample]:
        if source_dir is None:
            raise SourceError(
                f"task {task.id!r}: IconQA is distributed as a zip from its project page; pass source_dir containing {ROOT}/"
            )
        probs_need, splits_need, _ = self.layout(task)
        ppath, spath = probs_need.find_one(source_dir, task), splits_need.find_one(source_dir, task)
        root = ppath.parent
        rule = task.source.rule
        qtype, grades = rule["ques_type"], set(rule["grades"])
        problems = read_json(ppath, "IconQA problems {pid: {...}}")
        splits = read_json(spath, "IconQA pid splits {'<ques_type>_<split>': [pid]}")
        out, seen = [], set()
        for split in rule.get("splits", SPLITS):
            key = f"{qtype}_{split}"
            if key not in splits:
                raise SourceError(f"{spath}: no key {key!r} (keys: {sorted(splits)[:12]} ...)")
            for pid in splits[key]:
                pid = str(pid)
                if pid in seen:
                    continue
                seen.add(pid)
                p = problems.get(pid)
                if p is None:
                    raise SourceError(f"{spath}: pid {pid!r} is not in problems.json")
                if field(p, "grade", ppath) not in grades:
                    continue
                img = open_image(root / "iconqa" / split / qtype / pid / "image.png", f"problem {pid}")
                ans = field(p, "answer", ppath)
                choices = [str(c) for c in p.get("choices") or []]
                if qtype == "fill_in_blank":
                    answer, choices = str(ans), []
                else:
                    if isinstance(ans, str) and ans.strip().isdigit():
                        ans = int(ans)
                    if not isinstance(ans, int) or not 0 <= ans < len(choices):
                        raise SourceError(
                            f"{ppath}: problem {pid} answer {ans!r} is not an index into its {len(choices)} choices"
                        )
                    answer = choices[ans]
                out.append(
                    make_sample(
                        task,
                        pid,
                        str(p["question"]),
                        answer,
                        images=[img],
                        choices=choices,
                        meta={"grade": p["grade"], "ques_type": qtype, "split": split},
                    )
                )
        yield from finish(task, out)


register_loader(IconQALoader())
