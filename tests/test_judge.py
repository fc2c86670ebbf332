"""The LLM-judge hook (drake_bench.evaluation.judge): ratings parsed as the Fed-Aya protocol prints them, free text
rated by the run's judge in the evaluator's process, every other item scored by its own rule, the judge named in
the result and in the run's fingerprint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from drake_bench.benchmarks.manifest import parse_manifest
from drake_bench.benchmarks.sample import AnswerType, Sample
from drake_bench.errors import DrakeBenchError, PluginError
from drake_bench.evaluation.judge import (
    JUDGE_PROMPT,
    Judge,
    JudgeQuery,
    judged_scores,
    load_judge,
    parse_rating,
    rating_score,
)
from drake_bench.evaluator.standard import RunConfig, run
from drake_bench.plugins.examples.majority import MajorityAnswer
from drake_bench.plugins.protocol import MethodMeta, ModelIdentity
from drake_bench.plugins.registry import available_methods, register_method


class ConstantJudge:
    """Rates every answer 7 and keeps what it was shown."""

    identity = "constant-judge 1.0 (rates 7)"
    shown: list[JudgeQuery] = []
    calls = 0

    def rate(self, queries):
        ConstantJudge.calls += 1
        ConstantJudge.shown.extend(queries)
        return [7.0] * len(queries)


class NotAJudge:
    identity = ""


def _sample(kind: AnswerType, answer: str, **kw) -> Sample:
    return Sample(
        id=f"t/{answer}",
        question=f"question for {answer}",
        answer=answer,
        answer_type=kind,
        task_id="t",
        source="s",
        **kw,
    )


@pytest.mark.parametrize(
    "text, rating",
    [
        ("The answer is fluent. Rating: [[7]]", 7.0),
        ("[[10]]", 10.0),
        ("Rating: [[6.5]] and then [[2]]", 6.5),
        ("Rating: 7", None),
        ("[[0]]", None),
        ("[[11]]", None),
        ("[[seven]]", None),
        ("", None),
    ],
)
def test_the_rating_is_the_first_double_bracketed_number_in_one_to_ten(text, rating):
    assert parse_rating(text) == rating


def test_the_prompt_is_the_aya_papers_with_the_three_slots():
    assert JUDGE_PROMPT.startswith("[Instruction]\nPlease act as an impartial judge")
    assert '"[[rating]]", for example: "Rating: [[5]]"' in JUDGE_PROMPT
    filled = JUDGE_PROMPT.format(question="Q?", answer="A.", reference="R.")
    assert filled.endswith(
        "[Question]\nQ?\n[The Start of Assistant's Answer]\nA.\n[The End of Assistant's Answer]\n[Reference]\nR."
    )


def test_free_text_is_rated_and_every_other_item_keeps_its_rule(monkeypatch):
    import drake_bench.evaluation.scoring as scoring

    def no_rouge(*_a):
        raise AssertionError("a judged item's Rouge-L was computed, then thrown away")

    monkeypatch.setattr(scoring, "rouge_l_f1", no_rouge)
    ConstantJudge.shown.clear()
    samples = [
        _sample(AnswerType.FREE_TEXT, "a cat on a mat"),
        _sample(AnswerType.YES_NO, "yes", choices=["yes", "no"]),
        _sample(AnswerType.FREE_TEXT, "two dogs"),
    ]
    scores = judged_scores(ConstantJudge(), ["a cat", "no", "dogs"], samples)
    assert scores == [pytest.approx(0.7), 0.0, pytest.approx(0.7)]  # the yes/no item is wrong by its own rule
    assert ConstantJudge.shown == [
        JudgeQuery("question for a cat on a mat", "a cat", "a cat on a mat"),
        JudgeQuery("question for two dogs", "dogs", "two dogs"),
    ]
    assert rating_score(None) == 0.0 and rating_score(10) == 1.0


def test_a_judge_that_breaks_the_contract_is_named():
    class Short:
        identity = "short"

        def rate(self, queries):
            return [5.0]

    class OutOfRange(Short):
        def rate(self, queries):
            return [0.0] * len(queries)

    two = [_sample(AnswerType.FREE_TEXT, "x"), _sample(AnswerType.FREE_TEXT, "y")]
    with pytest.raises(DrakeBenchError, match="'short' returned 1 ratings for 2 answers"):
        judged_scores(Short(), ["x", "y"], two)
    with pytest.raises(DrakeBenchError, match=r"rated an answer 0.0: ratings are in \[1, 10\]"):
        judged_scores(OutOfRange(), ["x", "y"], two)
    with pytest.raises(DrakeBenchError, match="is not a judge: it needs an `identity`"):
        load_judge(f"{__name__}:NotAJudge")
    with pytest.raises(DrakeBenchError, match="cannot import 'Nope'"):
        load_judge(f"{__name__}:Nope")
    made = load_judge(f"{__name__}:ConstantJudge")  # a class is called with no arguments
    assert isinstance(made, ConstantJudge) and isinstance(made, Judge)


def _config(toy_free_text, out: Path, **kw) -> RunConfig:
    manifest, root = toy_free_text
    return RunConfig(
        benchmark=manifest,
        data_dir=root,
        method="majority-answer",
        scenario="static",
        seeds=[0],
        rounds=2,
        local_steps=1,
        numerics="native",
        isolation="inline",
        fast_adaptation=False,
        out=str(out),
        **kw,
    )


def test_a_judged_run_rates_free_text_records_its_judge_and_never_resumes_as_unjudged(toy_free_text, tmp_path):
    ConstantJudge.shown.clear()
    ConstantJudge.calls = 0
    judged = run(_config(toy_free_text, tmp_path / "judged", judge=f"{__name__}:ConstantJudge"))
    plain = run(_config(toy_free_text, tmp_path / "plain"))
    assert judged.evaluation.judge == ConstantJudge.identity and plain.evaluation.judge is None
    free = {
        t.id
        for t in parse_manifest(json.loads(Path(toy_free_text[0]).read_text()), where="t").tasks
        if t.answer_type == AnswerType.FREE_TEXT
    }
    assert free == {"c1-t1", "c2-t1"}
    plain_scores = {(r.eval_round, r.client, r.owner, r.task): r.score for r in plain.raw.scores}
    for r in judged.raw.scores:
        if r.task in free:  # every free-text answer rated 7 by the judge
            assert r.score == pytest.approx(0.7)
        else:  # yes/no items scored by their rule, as without a judge
            assert r.score == plain_scores[(r.eval_round, r.client, r.owner, r.task)]
    assert ConstantJudge.shown and {q.reference.split(" of ")[1] for q in ConstantJudge.shown} == free
    # one batch per evaluation point: every client's answers on every task seen so far, together
    assert ConstantJudge.calls == len(judged.fl.eval_rounds)
    assert len(ConstantJudge.shown) == sum(r.n for r in judged.raw.scores if r.task in free)
    from drake_bench.evaluation.table import summary_markdown

    assert f"Free text rated by an LLM judge (majority-answer 1.0: {ConstantJudge.identity})" in summary_markdown(
        [judged]
    )
    assert "LLM judge" not in summary_markdown([plain])
    # ratings and Rouge-L are different scales: `report` refuses to table them together
    from typer.testing import CliRunner

    from drake_bench.cli import app

    files = [str(next((tmp_path / name).rglob("result.json"))) for name in ("plain", "judged")]
    shown = CliRunner().invoke(app, ["report", *files], env={"COLUMNS": "300"})
    assert shown.exit_code != 0 and f"free text scored by {ConstantJudge.identity!r} (not 'Rouge-L')" in shown.output
    alone = CliRunner().invoke(app, ["report", files[1]], env={"COLUMNS": "300"})  # the table says it was judged
    assert (
        alone.exit_code == 0
        and f"Free text rated by an LLM judge (majority-answer 1.0: {ConstantJudge.identity})"
        in " ".join(alone.output.split())
    )
    # the judge is part of what the run computed: its result file never resumes into an unjudged run
    with pytest.raises(DrakeBenchError, match="different run configuration"):
        run(_config(toy_free_text, tmp_path / "judged"))


def test_a_judge_on_a_benchmark_without_free_text_is_refused(toy, tmp_path):
    manifest, root = toy
    config = RunConfig(
        benchmark=manifest,
        data_dir=root,
        method="majority-answer",
        scenario="static",
        seeds=[0],
        rounds=2,
        local_steps=1,
        numerics="native",
        isolation="inline",
        fast_adaptation=False,
        out=str(tmp_path),
        judge=f"{__name__}:ConstantJudge",
    )
    with pytest.raises(
        DrakeBenchError, match="toy has no free-text tasks scored by Rouge-L, and a judge rates only those"
    ):
        run(config)


@pytest.mark.usefixtures("one_torch_thread")
def test_a_zoo_model_judges_through_the_same_hook(monkeypatch):
    """The model judge on the smallest shipped text model: it loads, prompts, decodes and parses (a tiny model
    rarely writes a rating, so each one is None or in range), and its identity names the weights it loaded."""
    from drake_bench.models.shipped import ENV_SOURCE, shipped_identity

    monkeypatch.setenv(ENV_SOURCE, "shipped")  # the checked-in weights, as a user's run loads them (no pretraining)
    judge = load_judge("tiny-llama-s")
    queries = [JudgeQuery("What is 2 + 2?", "4", "Four."), JudgeQuery("Name a colour.", "blue", "Red.")]
    replies = judge.judgements(queries)
    assert len(replies) == 2 and all(isinstance(r, str) for r in replies)
    ratings = judge.rate(queries)
    assert [parse_rating(r) for r in replies] == ratings
    identity = json.loads(judge.identity)
    assert identity["model"] == "tiny-llama-s" and identity["decoding"]["do_sample"] is False
    assert identity["weights"] == shipped_identity("tiny-llama-s")  # the sha256 of the checkpoint it loaded


def test_the_cli_refuses_a_judge_where_nothing_is_free_text_before_any_run_starts(toy, tmp_path):
    from typer.testing import CliRunner

    from drake_bench.cli import app

    manifest, root = toy
    result = CliRunner().invoke(
        app,
        [
            "run",
            "--benchmark",
            manifest,
            "--data-dir",
            root,
            "--methods",
            "majority-answer",
            "--out",
            str(tmp_path),
            "--judge",
            f"{__name__}:ConstantJudge",
        ],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code != 0 and "toy has no free-text tasks scored by Rouge-L" in " ".join(result.output.split())
    assert not any(tmp_path.iterdir())  # refused before anything was written


@pytest.mark.usefixtures("one_torch_thread")
def test_a_judge_from_a_local_folder_is_pinned_by_its_weight_files():
    import hashlib

    from drake_bench.models.shipped import verify_shipped

    folder = verify_shipped("tiny-llama-s")
    identity = json.loads(load_judge(str(folder)).identity)
    files = identity["weights"]["safetensors_sha256"]
    assert files and files == {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in folder.glob("*.safetensors")}


class SelfJudged(MajorityAnswer):
    """A method that claims a judge in its evaluation settings (only the evaluator may name one)."""

    meta = MethodMeta(name="self-judged", version="1.0", summary="claims a judge it did not run")

    def model_identity(self, model_name: str) -> ModelIdentity:
        return ModelIdentity(architecture=model_name)

    def evaluation_settings(self) -> dict:
        return {"decoding": {}, "batch_size": 1, "prompt_template_version": "1", "judge": "my own judge"}


def test_a_method_cannot_name_a_judge_in_its_evaluation_settings(toy_free_text, tmp_path):
    if "self-judged" not in available_methods():
        register_method(SelfJudged)
    with pytest.raises(PluginError, match=r"names a judge \('my own judge'\): the judge is the evaluator's"):
        run(_config(toy_free_text, tmp_path).model_copy(update={"method": "self-judged"}))
