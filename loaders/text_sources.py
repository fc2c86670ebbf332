"""Text sources of Fed-Scope, Fed-Aya and Fed-LLM-Large (free-text answers, Rouge-L).

* ``instruction_json`` (Fed-Scope): CodeAlpaca-20k JSON list of ``{instruction, input, output}`` (the Hub
  repo ``sahil2801/CodeAlpaca-20k`` ships it as ``code_alpaca_20k.json``); GSM8K lines ``{question,
  answer}``; Dolly-15k jsonl ``{instruction, context, response, category}``. ``rule.file`` may list
  several accepted names (first found is read); ``rule.split`` names the Hub split read without a local
  folder (default train; Fed-Scope's GSM8K test source reads ``test``). Checked 2026-11-30: ``openai/gsm8k``
  commit e53f048 ("Convert dataset to Parquet") adds ``main/{train,test}-00000-of-00001.parquet`` with features
  ``question, answer`` (1,319 test rows); ``databricks/databricks-dolly-15k`` commit b122d1b adds
  ``databricks-dolly-15k.jsonl``, records ``{instruction, context, response, category}``.
* ``aya`` (``CohereForAI/aya_dataset``): ``data/train-00000-of-00001.parquet`` and
  ``data/test-00000-of-00001.parquet`` (checked: the card's ``configs`` block maps split train to
  ``data/train-*`` and test to ``data/test-*``, 202,364 / 1,750 rows), rows ``{inputs, targets, language,
  language_code, annotation_type, user_id}``. Only the split in ``rule.split`` (default train) is read,
  so test rows never enter a topic task. Topic tasks come from ``rule.topic_labels`` (JSON
  ``{item_key: topic}``, item_key = sha1(inputs)[:16]); without it a stable hash assigns topics.
* ``fedllm_bench`` (FedLLM-Bench, ``rui-ye/FedLLM-Bench`` at 2455679): the README's data archive is
  placed in the repository's ``data/`` folder; ``training_scripts/FedChatbotIT/all.sh`` reads
  ``data/Fed-ChatbotIT/chatbotIT_237c_6k.json`` (237 clients) and ``training_scripts/FedAya/aya_all.sh``
  ``data/Fed-Aya/aya_38c_25k.json`` (38 clients). ``utils/benchmark_dataset.py::get_fed_datasets``
  reads each file as ``{client_key: [records]}``; records are ``{instruction, response}``
  (``utils/template.py`` formats ``example['instruction']`` / ``example['response']``) or, for the
  multi-turn sets, ``{"conversations": [{"from", "value"}]}``. Clients are ranked by size (desc), ties
  by key. Local root ``<source_dir>/FedLLM-Bench/`` with the files under ``data/`` or directly.
* ``fed_flan`` (FedDPA's Fed-FLAN, ``Lydia-yang/FedDPA`` at cf638c1): ``data/dataset1/`` and
  ``data/dataset2/`` each hold ``8/local_training_{0..7}.json`` (one FLAN task per client, a JSON list
  of ``{instruction, output, task, category}``, 300 records) and ``flan_test_200_selected_nstrict_1.jsonl``
  (200 records per task, same fields). The task is each record's ``task`` field (e.g. ``snli``,
  ``cola``), not the file name. ``rule.dataset`` names the FedDPA dataset, ``rule.task`` the FLAN
  task; ``rule.include_test`` adds the task's records from the test file to the pool.
  Local root ``<source_dir>/FedDPA/`` (the repository as cloned; ``data/`` may be dropped).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from drake_bench.benchmarks.sample import Sample
from drake_bench.benchmarks.spec import TaskSpec
from drake_bench.errors import SourceError

from . import register_loader
from ._common import (
    Need,
    field,
    finish,
    hub_rows,
    in_shard,
    make_sample,
    read_json,
    read_records,
    root_name,
    source_root,
    stable_unit,
    text_key,
)

_FORMATS = {
    "codealpaca": lambda r, p: (
        (field(r, "instruction", p) + ("\n" + r["input"] if r.get("input") else "")),
        field(r, "output", p),
    ),
    "gsm8k": lambda r, p: (field(r, "question", p), field(r, "answer", p)),
    "dolly": lambda r, p: (
        (field(r, "instruction", p) + ("\n" + r["context"] if r.get("context") else "")),
        field(r, "response", p),
    ),
}


class InstructionJSONLoader:
    name = "instruction_json"

    def layout(self, task: TaskSpec) -> list[Need]:
        files = task.source.rule["file"]
        files = [files] if isinstance(files, str) else list(files)
        root = root_name(task)
        return [
            Need(
                f"{task.source.dataset} records",
                tuple(f"{root}/{f}" for f in files),
                download=f"huggingface.co/datasets/{task.source.hub_repo}" if task.source.hub_repo else "",
            )
        ]

    def load(self, task: TaskSpec, source_dir: Path | None) -> Iterator[Sample]:
        rule = task.source.rule
        conv = _FORMATS[rule["format"]]
        if source_dir is None:
            rows, where = (
                list(hub_rows(task, config=task.source.subset, split=rule.get("split", "train"))),
                task.source.hub_repo or "",
            )
        else:
            path = self.layout(task)[0].find_one(source_dir, task)
            rows, where = read_records(path, f"{rule['format']} records"), str(path)
        out = []
        for r in rows:
            q, a = conv(r, where)
            k = text_key(q)
            if "shard" in rule and not in_shard(k, rule["shard"], rule.get("seed", 0)):
                continue
            out.append(make_sample(task, k, q, a, meta={"category": r.get("category")}))
        yield from finish(task, _dedupe(out))


def _dedupe(samples: list[Sample]) -> list[Sample]:
    seen, out = set(), []
    for s in samples:
        if s.id not in seen:
            seen.add(s.id)
            out.append(s)
    return out


class AyaLoader:
    name = "aya"

    def layout(self, task: TaskSpec) -> list[Need]:
        root, split = root_name(task), task.source.rule.get("split", "train")
        return [
            Need(
                f"Aya {split} split",
                (f"{root}/data/{split}-*.parquet", f"{root}/{split}-*.parquet", f"{root}/data/{split}*.jsonl"),
                download="huggingface.co/datasets/CohereForAI/aya_dataset (data/train-00000-of-00001.parquet)",
            ),
            Need(
                "Aya topic labels",
                (f"{root}/{task.source.rule.get('topic_labels', 'aya_topics.json')}",),
                kind="file",
                required=False,
            ),
        ]

    def load(self, task: TaskSpec, source_dir: Path | None) -> Iterator[Sample]:
        rule = task.source.rule
        labels: dict[str, str] = {}
        if source_dir is None:
            rows = list(hub_rows(task, split=rule.get("split", "train")))
        else:
            root = source_root(task, source_dir)
            need = self.layout(task)[0]
            files = need.find(source_dir)
            if not files:
                need.find_one(source_dir, task)
            rows = [r for f in files for r in read_records(f, "Aya rows {inputs, targets, language_code}")]
            lab = root / rule.get("topic_labels", "aya_topics.json")
            if lab.is_file():
                labels = read_json(lab, "topic labels {item_key: topic}")
        topics, langs = rule["topics"], set(rule["languages"])
        out = []
        for r in rows:
            if field(r, "language_code", "Aya row") not in langs:
                continue
            k = text_key(r["inputs"])
            topic = labels.get(k) or topics[int(stable_unit(k, rule.get("seed", 0)) * len(topics))]
            if topic != rule["topic"]:
                continue
            out.append(
                make_sample(
                    task,
                    k,
                    r["inputs"],
                    field(r, "targets", "Aya row"),
                    meta={"language_code": r["language_code"], "topic": topic},
                )
            )
        yield from finish(task, _dedupe(out))


def _qa(rec: dict[str, Any], where: str) -> tuple[str, str]:
    if "conversations" in rec:
        turns = rec["conversations"]
        q = next((t["value"] for t in turns if t.get("from") == "human"), None)
        a = next((t["value"] for t in turns if t.get("from") == "gpt"), None)
        if q is None or a is None:
            raise SourceError(f"{where}: record lacks a human and a gpt turn")
        return q, a
    return field(rec, "instruction", where), rec.get("response", rec.get("output", ""))


class FedLLMBenchLoader:
    name = "fedllm_bench"
    ROOT = "FedLLM-Bench"

    def layout(self, task: TaskSpec) -> list[Need]:
        f = task.source.rule["file"]
        return [
            Need(
                f"FedLLM-Bench {task.source.dataset} client file",
                (f"{self.ROOT}/data/{f}", f"{self.ROOT}/{f}"),
                download="github.com/rui-ye/FedLLM-Bench README: data archive (drive.google.com/file/d/1hKv5A0ROmTQQkcsTcYogCUIeF7Ux1pmy), unzipped into data/",
            )
        ]

    def load(self, task: TaskSpec, source_dir: Path | None) -> Iterator[Sample]:
        rule = task.source.rule
        path = self.layout(task)[0].find_one(source_dir or ".", task)
        data = read_json(path, "FedLLM-Bench client data {client_key: [records]}")
        clients: dict[str, list] = {}
        if isinstance(data, dict):
            clients = {str(k): v for k, v in data.items()}
        else:
            for rec in data:
                clients.setdefault(
                    str(field(rec, "client_id", path, "client key of a list-shaped FedLLM-Bench file")), []
                ).append(rec)
        ranked = sorted(clients, key=lambda k: (-len(clients[k]), k))
        rank = rule["client_rank"]
        if rank >= len(ranked):
            raise SourceError(f"{path}: client rank {rank} requested but the file has {len(ranked)} clients")
        ck = ranked[rank]
        out = []
        for i, rec in enumerate(clients[ck]):
            q, a = _qa(rec, str(path))
            out.append(make_sample(task, f"{ck}-{i}", q, a, meta={"client": ck}))
        yield from finish(task, out)


class FedFLANLoader:
    name = "fed_flan"
    ROOT = "FedDPA"
    TEST_FILE = "flan_test_200_selected_nstrict_1.jsonl"

    def layout(self, task: TaskSpec) -> list[Need]:
        ds = task.source.rule.get("dataset", "dataset1")
        root = task.source.subset or self.ROOT
        needs = [
            Need(
                f"Fed-FLAN {ds} client files",
                (f"{root}/data/{ds}/8/local_training_*.json", f"{root}/{ds}/8/local_training_*.json"),
                download="github.com/Lydia-yang/FedDPA (data/)",
            )
        ]
        if task.source.rule.get("include_test", True):
            needs.append(
                Need(
                    f"Fed-FLAN {ds} test file",
                    (f"{root}/data/{ds}/{self.TEST_FILE}", f"{root}/{ds}/{self.TEST_FILE}"),
                    download="github.com/Lydia-yang/FedDPA (data/)",
                )
            )
        return needs

    def load(self, task: TaskSpec, source_dir: Path | None) -> Iterator[Sample]:
        rule = task.source.rule
        needs = self.layout(task)
        files = needs[0].find(source_dir or ".")
        if not files:
            needs[0].find_one(source_dir or ".", task)
        rows = [(f, r) for f in files for r in read_records(f, "FLAN records {instruction, output, task}")]
        if len(needs) > 1:
            test = needs[1].find_one(source_dir or ".", task)
            rows += [(test, r) for r in read_records(test, "FLAN test records {instruction, output, task}")]
        tasks = sorted({str(field(r, "task", f, "the record's FLAN task name")) for f, r in rows})
        if rule["task"] not in tasks:
            raise SourceError(
                f"task {task.id!r}: FLAN task {rule['task']!r} is not among the records' task fields {tasks} "
                f"in {', '.join(str(f) for f in files)}"
            )
        out = []
        for f, r in rows:
            if r["task"] != rule["task"]:
                continue
            q = str(field(r, "instruction", f)) + ("\n" + r["input"] if r.get("input") else "")
            k = text_key(q)
            if in_shard(k, rule["shard"], rule.get("seed", 0)):
                out.append(
                    make_sample(
                        task,
                        k,
                        q,
                        str(field(r, "output", f)),
                        meta={"flan_task": r["task"], "category": r.get("category")},
                    )
                )
        yield from finish(task, _dedupe(out))


for _loader in (InstructionJSONLoader(), AyaLoader(), FedLLMBenchLoader(), FedFLANLoader()):
    register_loader(_loader)
