"""GQA (Hudson & Manning 2019) questions, split by QA type and semantic type (HFLB clients 1-3).

Format, as published: ``questions1.2.zip`` (downloads.cs.stanford.edu/nlp/data/gqa/questions1.2.zip)
unpacks to ``questions1.2/`` holding ``{train,val,testdev}_balanced_questions.json`` and
``{val,testdev}_all_questions.json`` plus ``train_all_questions/train_all_questions_<k>.json``, each
``{qid: {imageId, question, answer, fullAnswer, isBalanced, types: {structural, semantic, detailed},
...}}``; beside them ``{test,challenge}_{all,balanced}_questions.json`` and
``submission_all_questions.json`` carry no ``answer``. ``images.zip`` unpacks to ``images/<imageId>.jpg``.
Checked 2025-05: public loaders reading ``GQA/questions1.2/train_balanced_questions.json`` /
``questions1.2/train_all_questions/train_all_questions_0.json`` and skipping test/challenge answers
(``if 'answer' in datum``), the lmms-eval GQA task (``doc["imageId"]``). The ``types`` values
(structural verify/query/choose/logical/compare; semantic attr/rel/obj/cat/global) are GQA's
documented question types.
Rule: ``files`` (question files to read, default the train and val balanced sets; files without answers
are an error), ``answers`` (keep only these answers, yes/no client), ``structural``, ``semantic``,
``num_choices`` (2: options parsed from "X or Y"; 4: answer + 3 seeded distractors of the same
semantic type).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from drake_bench.benchmarks.sample import AnswerType, Sample
from drake_bench.benchmarks.spec import TaskSpec
from drake_bench.errors import SourceError

from . import register_loader
from ._common import Need, field, finish, make_sample, open_image, read_json, root_name, source_root, stable_unit

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


DEFAULT_FILES = ["train_balanced_questions.json", "val_balanced_questions.json"]
DOWNLOAD = (
    "downloads.cs.stanford.edu/nlp/data/gqa/questions1.2.zip and images.zip (unzip into the source folder's GQA/)"
)


class GQALoader:
    name = "gqa"
    unconfirmed = (
        "the top-level folder of questions1.2.zip (questions1.2/ as public loaders use it; questions/ also accepted)",
    )

    def layout(self, task: TaskSpec) -> list[Need]:
        root = root_name(task)
        files = task.source.rule.get("files", DEFAULT_FILES)
        return [
            *(
                Need(
                    f"GQA {f}", (f"{root}/questions1.2/{f}", f"{root}/questions/{f}", f"{root}/{f}"), download=DOWNLOAD
                )
                for f in files
            ),
            Need("GQA images", (f"{root}/images",), kind="images", download=DOWNLOAD),
        ]

    def load(self, task: TaskSpec, source_dir: Path | None) -> Iterator[Sample]:
        source_root(task, source_dir)
        rule = task.source.rule
        needs = self.layout(task)
        files = [n.find_one(source_dir, task) for n in needs[:-1]]
        images = needs[-1].find_one(source_dir, task)
        questions: dict[str, dict] = {}
        for f in files:
            data = read_json(f, "GQA questions {qid: {imageId, question, answer, types}}")
            if not isinstance(data, dict):
                raise SourceError(f"{f}: expected GQA's {{question id: question}} object, got {type(data).__name__}")
            missing = next((qid for qid, q in data.items() if "answer" not in q), None)
            if missing is not None:
                raise SourceError(
                    f"{f}: question {missing} has no 'answer' (GQA's test, challenge and submission files carry none); "
                    "list only train/val/testdev files in rule.files"
                )
            questions.update(data)
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
            img = open_image(images / f"{field(q, 'imageId', files[0])}.jpg", f"question {qid}")
            out.append(
                make_sample(
                    task,
                    qid,
                    q["question"],
                    q["answer"],
                    images=[img],
                    choices=choices,
                    answer_type=task.answer_type if choices else AnswerType.OPEN,
                    meta={"types": types},
                )
            )
        yield from finish(task, out)


register_loader(GQALoader())
