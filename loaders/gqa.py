"""GQA (Hudson & Manning 2019) questions, split by QA type and semantic type (HFLB clients 1-3).

Format: ``questions/*_questions.json`` = ``{qid: {imageId, question, answer, fullAnswer, types:
{structural, semantic, detailed}, ...}}``; images ``images/<imageId>.jpg``.
Checked: stored public code (lmms-eval GQA task uses ``doc["imageId"]``, ``doc["question"]``; xGQA
notes: dict keyed by question id with ``question``, ``imageId``, ``answer``). ``types`` values
(structural verify/query/choose/logical/compare; semantic attr/rel/obj/cat/global) are GQA's
documented question types [I: not re-read here].
Rule: ``answers`` (keep only these answers, yes/no client), ``structural``, ``semantic``,
``num_choices`` (2: options parsed from "X or Y"; 4: answer + 3 seeded distractors of the same
semantic type), ``files`` (question files; default all ``*_questions.json``).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ..errors import SourceError
from ..sample import AnswerType, Sample
from ..spec import TaskSpec
from . import register_loader
from ._common import field, finish, make_sample, open_image, read_json, source_root, stable_unit

_OR = re.compile(r"([\w\-']+(?: [\w\-']+)?) or ([\w\-']+(?: [\w\-']+)?)\s*\?\s*$")


def two_options(question: str, answer: str) -> list[str] | None:
    m = _OR.search(question)
    if not m:
        return None
    left, right = m.group(1).split()[-1], m.group(2)
    for a, b in ((left, right), (m.group(1), right)):
        if answer in (a, b):
            return [a, b]
    return None


class GQALoader:
    name = "gqa"

    def load(self, task: TaskSpec, source_dir: Path | None) -> Iterator[Sample]:
        root = source_root(task, source_dir)
        rule = task.source.rule
        files = [root / "questions" / f for f in rule["files"]] if "files" in rule else sorted((root / "questions").glob("*_questions.json"))
        if not files:
            raise SourceError(f"{root / 'questions'}: no *_questions.json files (expected GQA question files)")
        questions: dict[str, dict] = {}
        for f in files:
            questions.update(read_json(f, "GQA questions {qid: {imageId, question, answer, types}}"))
        pools: dict[str, set[str]] = defaultdict(set)
        for q in questions.values():
            pools[q.get("types", {}).get("semantic", "")].add(q.get("answer", ""))
        out = []
        for qid in sorted(questions):
            q = questions[qid]
            types = field(q, "types", files[0], "types.structural/semantic")
            if "answers" in rule and q["answer"] not in rule["answers"]:
                continue
            if "answers" not in rule and q["answer"] in ("yes", "no"):
                continue
            if "structural" in rule and types.get("structural") not in rule["structural"]:
                continue
            if "semantic" in rule and types.get("semantic") not in rule["semantic"]:
                continue
            choices: list[str] = []
            n = rule.get("num_choices")
            if "answers" in rule:
                choices = ["yes", "no"]
            elif n == 2:
                choices = two_options(q["question"], q["answer"]) or []
                if not choices:
                    continue
            elif n:
                others = sorted(pools[types.get("semantic", "")] - {q["answer"]})
                if len(others) < n - 1:
                    continue
                rng = np.random.default_rng(int(stable_unit(qid) * 2**32))
                picks = [others[i] for i in rng.choice(len(others), n - 1, replace=False)]
                choices = picks + [q["answer"]]
                choices = [choices[i] for i in rng.permutation(n)]
            img = open_image(root / "images" / f"{field(q, 'imageId', files[0])}.jpg", f"question {qid}")
            out.append(make_sample(task, qid, q["question"], q["answer"], images=[img], choices=choices,
                                   answer_type=task.answer_type if choices else AnswerType.OPEN, meta={"types": types}))
        yield from finish(task, out)


register_loader(GQALoader())
