"""IconQA (Lu et al. 2021), read from its original release, split by question type and grade level.

Format (``iconqa_data/`` as released): ``problems.json`` = ``{pid: {question, choices, answer,
ques_type, grade, ...}}`` (``answer`` is an option index for ``choose_txt``, a string for
``fill_in_blank``), ``pid_splits.json`` = ``{"<ques_type>_<split>": [pid, ...]}`` and images at
``iconqa/<split>/<ques_type>/<pid>/image.png``.
Checked: stored public code reading ``problems.json`` / ``pid_splits.json``
(``pid_splits[f'choose_txt_{split}']``, ``problems[pid]['question'|'choices'|'answer']`` with an index
answer, images at ``iconqa/{split}/choose_txt/{pid}/image.png``). ``ques_type``/``grade`` values
(``fill_in_blank``, ``choose_txt``; ``kindergarten``, ``grade1``) are [I].
Rule (partition): ``ques_type``, ``grades``; local root ``<source_dir>/iconqa_data``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from ..errors import SourceError
from ..sample import Sample
from ..spec import TaskSpec
from . import register_loader
from ._common import field, finish, make_sample, open_image, read_json

ROOT = "iconqa_data"


class IconQALoader:
    name = "iconqa"

    def load(self, task: TaskSpec, source_dir: Path | None) -> Iterator[Sample]:
        if source_dir is None:
            raise SourceError(f"task {task.id!r}: IconQA is distributed as a zip from its project page; pass source_dir containing {ROOT}/")
        root = Path(source_dir) / ROOT
        rule = task.source.rule
        qtype, grades = rule["ques_type"], set(rule["grades"])
        problems = read_json(root / "problems.json", "IconQA problems {pid: {...}}")
        splits = read_json(root / "pid_splits.json", "IconQA pid splits {'<ques_type>_<split>': [pid]}")
        out = []
        for key in sorted(splits):
            if not key.startswith(qtype + "_"):
                continue
            split = key[len(qtype) + 1:]
            for pid in splits[key]:
                p = problems.get(pid)
                if p is None:
                    raise SourceError(f"{root / 'pid_splits.json'}: pid {pid!r} is not in problems.json")
                if field(p, "grade", root / "problems.json") not in grades:
                    continue
                img = open_image(root / "iconqa" / split / qtype / pid / "image.png", f"problem {pid}")
                ans = field(p, "answer", root / "problems.json")
                choices = [str(c) for c in p.get("choices") or []]
                if qtype == "fill_in_blank":
                    answer, choices = str(ans), []
                else:
                    if not isinstance(ans, int) or not 0 <= ans < len(choices):
                        raise SourceError(f"{root / 'problems.json'}: problem {pid} answer {ans!r} is not an index into its {len(choices)} choices")
                    answer = choices[ans]
                out.append(make_sample(task, pid, str(p["question"]), answer, images=[img], choices=choices,
                                       meta={"grade": p["grade"], "ques_type": qtype, "split": split}))
        yield from finish(task, out)


register_loader(IconQALoader())
