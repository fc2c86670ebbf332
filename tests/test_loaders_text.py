"""Text sources as published (issue 32, problems 4, 5 and 11): FedLLM-Bench files, FedDPA's Fed-FLAN, Aya's splits.

Fixture formats:
* FedLLM-Bench: rui-ye/FedLLM-Bench@2455679 training_scripts/FedChatbotIT/all.sh (``data/Fed-ChatbotIT/chatbotIT_237c_6k.json``),
  training_scripts/FedAya/aya_all.sh (``data/Fed-Aya/aya_38c_25k.json``), utils/benchmark_dataset.py (``{client: [records]}``),
  utils/template.py (records ``{instruction, response}``).
* Fed-FLAN: Lydia-yang/FedDPA@cf638c1 data/dataset{1,2}/8/local_training_{0..7}.json (lists of ``{instruction, output, task,
  category}``, one FLAN task per file) and data/dataset{1,2}/flan_test_200_selected_nstrict_1.jsonl; code/fed_utils/client.py
  reads ``local_training_{client_id}.json``.
* Aya: CohereForAI/aya_dataset card (commit 74195be): ``data/train-00000-of-00001.parquet`` and ``data/test-00000-of-00001.parquet``,
  columns inputs, targets, language, language_code, annotation_type, user_id.
Records are made up.
"""

from __future__ import annotations

import pytest
from fixtures_real import dump, jsonl, parquet

from drake_bench.benchmarks.manifest import load_benchmark
from drake_bench.errors import SourceError
from drake_bench.loaders import get_loader


def _load(task, src):
    return list(get_loader(task.source.loader).load(task, src))


def test_fed_chatbotit_and_fed_aya_read_fedllm_bench_files(tmp_path) -> None:
    large = load_benchmark("fed-llm-large")
    data = tmp_path / "FedLLM-Bench" / "data"
    rec = lambda c, i: {"instruction": f"{c} asks {i}", "response": f"answer {i}"}  # noqa: E731
    dump(
        data / "Fed-ChatbotIT" / "chatbotIT_237c_6k.json",
        {f"user{k}": [rec(k, i) for i in range(k + 1)] for k in range(40)},
    )
    dump(data / "Fed-Aya" / "aya_38c_25k.json", {f"ann{k}": [rec(k, i) for i in range(k + 2)] for k in range(38)})
    top = _load(large.task("c1-chatbotit-u0"), tmp_path)
    assert {s.meta["client"] for s in top} == {"user39"} and len(top) == 40 and top[0].answer.startswith("answer")
    aya = _load(large.task("c19-fedaya-u0"), tmp_path)
    assert {s.meta["client"] for s in aya} == {"ann37"} and len(aya) == 39


FLAN_DS1 = [
    "definite_pronoun_resolution",
    "snli",
    "cola",
    "glue_qqp",
    "trec",
    "web_nlg_en",
    "fix_punct",
    "wic",
]  # local_training_0..7


def _write_feddpa(src, n_train: int = 40, n_test: int = 20) -> None:
    base = src / "FedDPA" / "data" / "dataset1"
    test = []
    for k, task in enumerate(FLAN_DS1):
        rows = [
            {
                "instruction": f"[{task}] example {i}\nOPTIONS:\n- yes\n- no",
                "output": "yes" if i % 2 else "no",
                "task": task,
                "category": "nli",
            }
            for i in range(n_train)
        ]
        dump(base / "8" / f"local_training_{k}.json", rows)
        test += [
            {"instruction": f"[{task}] test {i}", "output": "no", "task": task, "category": "nli"}
            for i in range(n_test)
        ]
    jsonl(base / "flan_test_200_selected_nstrict_1.jsonl", test)
    # dataset2's files sit beside: never read for dataset1 tasks
    dump(
        src / "FedDPA" / "data" / "dataset2" / "8" / "local_training_0.json",
        [{"instruction": "h", "output": "x", "task": "hellaswag", "category": "c"}],
    )


def test_fed_flan_reads_feddpa_layout_by_record_task(tmp_path) -> None:
    large = load_benchmark("fed-llm-large")
    _write_feddpa(tmp_path)
    flan = [t for t in large.tasks if t.source.loader == "fed_flan"]
    assert len(flan) == 32
    for t in flan:
        items = _load(t, tmp_path)
        assert items and {s.meta["flan_task"] for s in items} == {t.source.rule["task"]}, t.id
        assert all(f"[{t.source.rule['task']}]" in s.question for s in items)
    # the four quarter shards of a task are disjoint and cover its 60 records (40 train + 20 test)
    cola = [t for t in flan if t.source.rule["task"] == "cola"]
    keys = [s.id.split("/", 1)[1] for t in cola for s in _load(t, tmp_path)]
    assert len(keys) == len(set(keys)) == 60


def test_fed_flan_unknown_task_names_the_files(tmp_path) -> None:
    large = load_benchmark("fed-llm-large")
    _write_feddpa(tmp_path)
    t = next(t for t in large.tasks if t.source.loader == "fed_flan").model_copy(deep=True)
    t.source.rule["task"] = "hellaswag"  # a dataset2 task
    with pytest.raises(SourceError, match="local_training_0.json"):
        _load(t, tmp_path)


def test_aya_topic_tasks_read_the_train_split_only(tmp_path) -> None:
    aya = load_benchmark("fed-aya")
    data = tmp_path / "aya_dataset" / "data"
    row = lambda split, i, lang: {
        "inputs": f"{split} question {i}",
        "targets": f"{split} answer {i}",
        "language": "English",  # noqa: E731
        "language_code": lang,
        "annotation_type": "original-annotations",
        "user_id": f"u{i % 7}",
    }
    parquet(data / "train-00000-of-00001.parquet", [row("train", i, ["eng", "fra", "deu"][i % 3]) for i in range(60)])
    parquet(data / "test-00000-of-00001.parquet", [row("test", i, "eng") for i in range(30)])
    items = [s for t in aya.client(1).tasks for s in _load(aya.task(t), tmp_path)]
    assert len(items) == 40 and all(s.question.startswith("train") for s in items)
