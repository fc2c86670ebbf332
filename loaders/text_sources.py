"""Text sources of Fed-Scope, Fed-Aya and Fed-LLM-Large (free-text answers, Rouge-L).

* ``instruction_json`` (Fed-Scope): CodeAlpaca-20k JSON list of ``{instruction, input, output}``;
  GSM8K ``train.jsonl`` lines ``{question, answer}``; Dolly-15k jsonl ``{instruction, context,
  response, category}``. [I: upstream README field names; FS-LLM re-packages these datasets.]
* ``aya`` (``CohereForAI/aya_dataset``): parquet/jsonl rows ``{inputs, targets, language,
  language_code, annotation_type, user_id}`` (checked against the Aya dataset card's features). Topic tasks come from
  ``rule.topic_labels`` (JSON ``{item_key: topic}``, item_key = sha1(inputs)[:16]); without it a
  stable hash assigns topics (recorded as an [R] choice in the manifest).
* ``fedllm_bench`` (FedLLM-Bench): ``rule.file`` holds either ``{client_key: [records]}`` or a list of
  records with ``client_id``; records are ``{"conversations": [{"from": "human"|"gpt", "value"}]}``
  (checked: FedLLM-Bench ``utils/data_module.py`` reads ``example["conversations"]`` with
  ``from``/``value``; ``training_scripts/FedAya/aya_all.sh`` names ``data/Fed-Aya/aya_38c_25k.json``
  with 38 clients) or ``{instruction, response}``. Clients are ranked by size (desc), ties by key.
* ``fed_flan`` (FedDPA's Fed-FLAN): one ``<task>.json`` per FLAN task (list of ``{instruction,
  input?, output}``) under the root; tasks ranked by file name. [I: the FedDPA release layout was
  not in the stored docs.]
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import SourceError
from ..sample import Sample
from ..spec import TaskSpec
from . import register_loader
from ._common import field, finish, hub_rows, in_shard, make_sample, read_json, read_jsonl, source_root, stable_unit


def _rows(path: Path, expected: str) -> list[dict[str, Any]]:
    if path.suffix == ".jsonl":
        return read_jsonl(path, expected)
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    data = read_json(path, expected)
    if not isinstance(data, list):
        raise SourceError(f"{path}: expected a JSON list ({expected})")
    return data


def _key(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:16]


_FORMATS = {
    "codealpaca": lambda r, p: ((field(r, "instruction", p) + ("\n" + r["input"] if r.get("input") else "")), field(r, "output", p)),
    "gsm8k": lambda r, p: (field(r, "question", p), field(r, "answer", p)),
    "dolly": lambda r, p: ((field(r, "instruction", p) + ("\n" + r["context"] if r.get("context") else "")), field(r, "response", p)),
}


class InstructionJSONLoader:
    name = "instruction_json"

    def load(self, task: TaskSpec, source_dir: Path | None) -> Iterator[Sample]:
        rule = task.source.rule
        conv = _FORMATS[rule["format"]]
        if source_dir is None:
            rows, where = list(hub_rows(task, config=task.source.subset, split="train")), task.source.hub_repo or ""
        else:
            path = source_root(task, source_dir) / rule["file"]
            rows, where = _rows(path, f"{rule['format']} records"), str(path)
        out = []
        for r in rows:
            q, a = conv(r, where)
            k = _key(q)
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

    def load(self, task: TaskSpec, source_dir: Path | None) -> Iterator[Sample]:
        rule = task.source.rule
        labels: dict[str, str] = {}
        if source_dir is None:
            rows = list(hub_rows(task, split="train"))
        else:
            root = source_root(task, source_dir)
            files = sorted([*root.glob("**/*.parquet"), *root.glob("**/*.jsonl")])
            if not files:
                raise SourceError(f"{root}: no *.parquet / *.jsonl files (expected the Aya dataset's rows)")
            rows = [r for f in files for r in _rows(f, "Aya rows {inputs, targets, language_code}")]
            lab = root / rule.get("topic_labels", "aya_topics.json")
            if lab.is_file():
                labels = read_json(lab, "topic labels {item_key: topic}")
        topics, langs = rule["topics"], set(rule["languages"])
        out = []
        for r in rows:
            if field(r, "language_code", "Aya row") not in langs:
                continue
            k = _key(r["inputs"])
            topic = labels.get(k) or topics[int(stable_unit(k, rule.get("seed", 0)) * len(topics))]
            if topic != rule["topic"]:
                continue
            out.append(make_sample(task, k, r["inputs"], field(r, "targets", "Aya row"), meta={"language_code": r["language_code"], "topic": topic}))
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

    def load(self, task: TaskSpec, source_dir: Path | None) -> Iterator[Sample]:
        rule = task.source.rule
        path = Path(source_dir or ".") / "FedLLM-Bench" / rule["file"]
        data = read_json(path, "FedLLM-Bench client data")
        clients: dict[str, list] = {}
        if isinstance(data, dict):
            clients = {str(k): v for k, v in data.items()}
        else:
            for rec in data:
                clients.setdefault(str(field(rec, "client_id", path, "client key of a list-shaped FedLLM-Bench file")), []).append(rec)
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

    def load(self, task: TaskSpec, source_dir: Path | None) -> Iterator[Sample]:
        rule = task.source.rule
        root = Path(source_dir or ".") / "Fed-FLAN"
        files = sorted(root.glob("*.json"))
        if rule["task_rank"] >= len(files):
            raise SourceError(f"{root}: task rank {rule['task_rank']} requested but {len(files)} FLAN task files found")
        path = files[rule["task_rank"]]
        out = []
        for r in _rows(path, "FLAN records {instruction, input?, output}"):
            q = field(r, "instruction", path) + ("\n" + r["input"] if r.get("input") else "")
            k = _key(q)
            if in_shard(k, rule["shard"], rule.get("seed", 0)):
                out.append(make_sample(task, k, q, field(r, "output", path), meta={"flan_task": path.stem}))
        yield from finish(task, _dedupe(out))


for _loader in (InstructionJSONLoader(), AyaLoader(), FedLLMBenchLoader(), FedFLANLoader()):
    register_loader(_loader)
