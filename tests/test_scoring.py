"""Per-answer scoring (spec A8): every case checked against a hand-computed value."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from drake_bench.benchmarks.sample import AnswerType, MethodSample, Sample
from drake_bench.evaluation.scoring import (
    LEGACY_SCORER_VERSION,
    SCORER_VERSION,
    SCORER_VERSIONS,
    answer_cap,
    normalize_answer,
    open_f1,
    open_recall,
    open_score,
    parse_choice,
    rouge_l_f1,
    score_batch,
    score_details,
    score_prediction,
)
from drake_bench.plugins.protocol import Message, MethodMeta, State
from drake_bench.plugins.registry import register_method


def make(answer: str, kind: str, choices: list[str] | None = None, sid: str = "s1") -> Sample:
    return Sample(
        id=sid,
        question="q?",
        choices=choices or [],
        answer=answer,
        answer_type=AnswerType(kind),
        task_id="t",
        source="src",
    )


COLOURS = ["red", "blue", "green", "yellow"]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("B", 1),
        ("b", 1),
        ("(B)", 1),
        ("[C]", 2),
        ("B.", 1),
        ("D)", 3),
        ("Answer: B", 1),
        ("answer: c", 2),
        ("The answer is (A).", 0),
        ("The correct option is D", 3),
        ("ANSWER: (d)", 3),
        ("The answer is a red car", None),  # article after the keyword, not option A
        ("The answer is a", 0),  # ... but a lone lower-case letter ending the response is a letter
        ("B. blue", 1),
        ("(C) green", 2),
        ("blue", 1),
        ("  Blue. ", 1),
        ("The Yellow", 3),  # article stripped, then exact option text
        ("E", None),  # letter out of range
        ("A red car", None),  # leading article, not option A
        ("I think it is green", None),  # option text inside a sentence is not exact
        ("", None),
        ("purple", None),
    ],
)
def test_parse_choice(text: str, expected: int | None) -> None:
    assert parse_choice(text, COLOURS) == expected


def test_parse_choice_prefers_exact_option_text_over_letters() -> None:
    # options whose text is a letter: the text wins, so "A" means the option reading "A" (index 1)
    assert parse_choice("A", ["B", "A"]) == 1
    assert parse_choice("B", ["B", "A"]) == 0


def test_parse_choice_yes_no_leading_word() -> None:
    assert parse_choice("Yes, the two images match.", ["yes", "no"]) == 0
    assert parse_choice("No.", ["yes", "no"]) == 1
    assert parse_choice("Nope", ["yes", "no"]) is None
    # the leading-word rule is only for yes/no pairs
    assert parse_choice("red, surely", COLOURS) is None


def test_parse_choice_no_choices() -> None:
    assert parse_choice("A", []) is None


def test_multiple_choice_scores() -> None:
    s = make("green", "multiple_choice", COLOURS)
    assert score_prediction("C", s) == 1.0
    assert score_prediction("Answer: (C)", s) == 1.0
    assert score_prediction("green", s) == 1.0
    assert score_prediction("B", s) == 0.0
    assert score_prediction("no idea", s) == 0.0
    d = score_details("C", s)
    assert (d.score, d.exact_match, d.parsed) == (1.0, 1.0, 2)


def test_multiple_choice_answer_given_as_letter() -> None:
    s = make("B", "multiple_choice", COLOURS)
    assert score_prediction("blue", s) == 1.0
    assert score_prediction("red", s) == 0.0


def test_answer_not_among_choices_is_an_error_naming_the_sample() -> None:
    s = make("purple", "multiple_choice", COLOURS, sid="item-7")
    with pytest.raises(ValueError, match="item-7"):
        score_prediction("A", s)


def test_yes_no_without_explicit_choices() -> None:
    s = make("No", "yes_no")
    assert score_prediction("no", s) == 1.0
    assert score_prediction("B", s) == 1.0  # option B of the implicit (yes, no)
    assert score_prediction("Yes", s) == 0.0
    assert score_prediction("maybe", s) == 0.0


def test_normalize_answer() -> None:
    assert normalize_answer("The Two cats, an apple!") == ["2", "cats", "apple"]
    assert normalize_answer("3.5 kg; 1,000 items.") == ["3.5", "kg", "1000", "items"]
    assert normalize_answer("Twelve") == ["12"]
    # non-ASCII letters are kept, punctuation of other scripts removed
    assert normalize_answer("Café «très» chaud。") == ["café", "très", "chaud"]
    assert normalize_answer("Der Hund") == ["der", "hund"]  # only English articles are stripped


@pytest.mark.parametrize(
    "pred, gt, expected",
    [
        ("red car", "red car", 1.0),
        ("a red car", "the red car", 1.0),
        ("red", "red car", 0.5),
        ("car red blue", "red car", 1.0),  # extra tokens do not lower recall
        ("two dogs", "2 dogs", 1.0),  # number words as digits
        ("dog dog", "dog dog cat", 2 / 3),  # multiset: both dogs count
        ("dog", "dog dog cat", 1 / 3),  # ... but only as often as predicted
        ("dog dog dog dog", "dog cat", 0.5),  # repeats beyond GT count do not exceed it
        ("blue", "red car", 0.0),
        ("", "red", 0.0),
    ],
)
def test_open_score_rule_1_0_is_token_recall(pred: str, gt: str, expected: float) -> None:
    assert open_recall(pred, gt) == pytest.approx(expected)
    assert open_score(pred, gt, "1.0") == pytest.approx(expected)
    assert score_prediction(pred, make(gt, "open"), scorer_version="1.0") == pytest.approx(expected)


@pytest.mark.parametrize(
    "pred, gt, expected",
    [
        ("red car", "red car", 1.0),
        ("a red car", "the red car", 1.0),  # articles are not tokens
        ("car red", "red car", 1.0),  # a multiset: order does not matter
        ("red", "red car", 2 / 3),  # P 1, R 1/2
        ("red car blue", "red car", 0.8),  # P 2/3, R 1: an extra token costs (recall would say 1.0)
        ("it is red", "red", 0.5),  # P 1/3, R 1: a short lead-in is inside the cap (4 tokens) and costs little
        ("dog dog", "dog dog cat", 0.8),  # P 1, R 2/3
        ("dog dog dog dog", "dog cat", 1 / 3),  # P 1/4, R 1/2: repeats beyond GT count are not overlap
        ("two dogs", "2 dogs", 1.0),  # number words as digits
        ("blue", "red car", 0.0),
        ("", "red", 0.0),
        # the cap: a one-token answer is scored on the response's first 4 tokens
        ("blue green yellow red", "red", 0.4),  # inside the cap: P 1/4, R 1
        ("blue green yellow purple red", "red", 0.0),  # 5th token: cut by the cap (uncapped F1 would be 1/3)
        ("blue green yellow purple red", "blue", 0.4),  # the first 4 kept, the 5th dropped from |pred|
        # a three-token answer: cap 6
        ("make it red make it blue", "make it blue", 2 * (3 / 6) / (3 / 6 + 1)),
        ("make it red make it green make it blue", "make it blue", 2 * (2 / 6) * (2 / 3) / (2 / 6 + 2 / 3)),
    ],
)
def test_open_score_rule_2_0_is_capped_token_f1(pred: str, gt: str, expected: float) -> None:
    assert open_f1(pred, gt) == pytest.approx(expected)
    assert open_score(pred, gt) == pytest.approx(expected)  # 2.0 is the default
    assert score_prediction(pred, make(gt, "open")) == pytest.approx(expected)
    assert score_prediction(pred, make(gt, "open"), scorer_version="2.0") == pytest.approx(expected)


def test_the_answer_cap_is_derived_from_the_answers_length() -> None:
    assert [answer_cap(n) for n in (0, 1, 2, 3, 4, 5, 10)] == [3, 4, 5, 6, 8, 10, 20]


def test_rule_2_0_is_the_default_and_both_rules_stay_selectable() -> None:
    assert SCORER_VERSIONS == ("1.0", "2.0") and SCORER_VERSION == "2.0" and LEGACY_SCORER_VERSION == "1.0"
    stuffed = "red blue green yellow purple orange make it add remove 1 2 3 4 5"  # every training answer joined
    s = make("orange", "open")
    assert score_prediction(stuffed, s, scorer_version="1.0") == 1.0  # recall: the stuffed list "knows" it
    assert score_prediction(stuffed, s) == 0.0  # F1 of the first 4 tokens: it is not among them
    assert score_batch([stuffed], [s]) == [0.0]
    assert score_batch([stuffed], [s], scorer_version="1.0") == [1.0]
    assert open_f1("red blue green yellow purple orange", "red") < open_recall("red blue green yellow", "red")
    with pytest.raises(ValueError, match="scorer version '3.0'.*1.0, 2.0"):
        score_prediction("red", s, scorer_version="3.0")
    with pytest.raises(ValueError, match="scorer version"):
        score_batch(["red"], [s], scorer_version="1")


def test_choice_and_free_text_scores_are_the_same_under_both_rules() -> None:
    samples = [
        make("green", "multiple_choice", COLOURS),
        make("yes", "yes_no", ["yes", "no"]),
        make("the cat is on the mat", "free_text"),
    ]
    preds = ["C", "No", "the cat sat on the mat and more words after it"]
    assert score_batch(preds, samples, scorer_version="1.0") == score_batch(preds, samples, scorer_version="2.0")


def test_open_exact_match_logged() -> None:
    s = make("the red car", "open")
    assert score_details("Red car.", s).exact_match == 1.0
    d = score_details("car red", s)
    assert (d.score, d.exact_match) == (1.0, 0.0)
    d = score_details("red car blue", s)
    assert (d.score, d.exact_match) == (pytest.approx(0.8), 0.0)
    assert score_details("red car blue", s, scorer_version="1.0").score == 1.0


@pytest.mark.parametrize("version", SCORER_VERSIONS)
def test_open_answer_that_normalises_to_nothing(version: str) -> None:
    s = make("the", "open")
    assert score_prediction("", s, scorer_version=version) == 1.0
    assert score_prediction("a", s, scorer_version=version) == 1.0
    assert score_prediction("cat", s, scorer_version=version) == 0.0


def test_rouge_l_hand_computed() -> None:
    # LCS("the cat sat on the mat", "the cat is on the mat") = the cat on the mat = 5; P = R = 5/6
    assert rouge_l_f1("the cat sat on the mat", "the cat is on the mat") == pytest.approx(5 / 6)
    # pred 4 tokens, ref 3 tokens, LCS 3: P = 3/4, R = 1, F = 2PR/(P+R) = 6/7
    assert rouge_l_f1("Привет мир как дела", "привет как дела") == pytest.approx(6 / 7)
    # CJK split per character: LCS 2 of 4/4
    assert rouge_l_f1("我爱北京", "我爱上海") == pytest.approx(0.5)
    assert rouge_l_f1("completely different", "nothing shared") == 0.0
    assert rouge_l_f1("Same text.", "same TEXT") == pytest.approx(1.0)


def test_free_text_score_in_unit_interval() -> None:
    s = make("the cat is on the mat", "free_text")
    assert score_prediction("the cat sat on the mat", s) == pytest.approx(5 / 6)


def test_score_batch() -> None:
    samples = [make("blue", "multiple_choice", COLOURS), make("red car", "open"), make("yes", "yes_no", ["yes", "no"])]
    assert score_batch(["B", "red", "A"], samples) == pytest.approx([1.0, 2 / 3, 1.0])  # "red" for "red car": F1
    assert score_batch(["B", "red", "A"], samples, scorer_version="1.0") == pytest.approx([1.0, 0.5, 1.0])
    with pytest.raises(ValueError, match="2 predictions for 3 samples"):
        score_batch(["B", "red"], samples)


# --------------------------------------------------------------------------- the answer-stuffing attack, end to end
# A model-free plugin answering every open question with every answer its client trained on scored Self 48 on the
# canonical drake-synth board under rule 1.0 (token recall), above every real method (~38). It runs here through the
# evaluator on a miniature drake-synth: two clients with three of its tasks each, drawn by its own generators (a
# choice task and two open ones, one-token and three-token answers, as drake-synth's clients hold), 40 items a task.

MINI_CLIENTS = {
    1: ["vqa-corners", "icon-count-easy", "dish-name"],
    2: ["rel-color-consistency", "rel-relative-caption", "rel-edit-instruction"],
}
MINI_RUN = dict(seeds=[0], rounds=2, local_steps=5, others_subsample=0, fast_adaptation=False, isolation="inline")


class AnswerStuffing:
    """Every open item answered with every distinct training answer its client saw, joined; a choice item with its
    first option. No model."""

    meta = MethodMeta(name="answer-stuffing", version="1.0", summary="Every training answer joined (the attack).")

    class Config(BaseModel):
        pass

    def __init__(self, config: "AnswerStuffing.Config | None" = None):
        self.config = config or self.Config()

    def setup(self, federation):  # noqa: ANN001
        pass

    def init_client(self, ctx):  # noqa: ANN001
        return State(metadata={"answers": []})

    def init_server(self):
        return State()

    def client_update(self, ctx, state, message, batches):  # noqa: ANN001
        return Message(), State(metadata={"answers": stuffed_answers(batches, state.metadata["answers"])})

    def aggregate(self, round_idx, server_state, uploads):  # noqa: ANN001
        return {c: Message() for c in uploads}, server_state

    def predict(self, ctx, state, queries):  # noqa: ANN001
        return [stuff(q, state.metadata["answers"]) for q in queries]


def stuffed_answers(batches, seen: list[str]) -> list[str]:  # noqa: ANN001
    """``seen`` and then each new answer of ``batches``, in the order they came."""
    out = list(seen)
    for batch in batches:
        out += [item.answer for item in batch if item.answer not in out]
    return out


def stuff(query: MethodSample, answers: list[str]) -> str:
    return query.choices[0] if query.choices else " ".join(answers)


register_method(AnswerStuffing)


@pytest.fixture(scope="module")
def mini_synth(tmp_path_factory) -> tuple[str, str]:
    """(manifest path, built folder) of the miniature drake-synth."""
    import json

    from drake_bench.benchmarks.build import build_benchmark
    from drake_bench.benchmarks.manifest import manifest_dict, parse_manifest
    from drake_bench.benchmarks.spec import (
        AsyncDefaults,
        BenchmarkSpec,
        ClientSpec,
        DirichletDefaults,
        FLConfig,
        ScenarioDefaults,
        SourceSpec,
        SubsamplingRule,
        TaskSpec,
    )
    from drake_bench.benchmarks.synth.registry import get_generator

    def task(name: str, group: str) -> TaskSpec:
        gen = get_generator(name)
        return TaskSpec(
            id=name,
            name=name,
            group=group,
            split="s",
            images=gen.images,
            num_images=gen.num_images,
            answer_type=gen.answer_type,
            metric="token_accuracy" if gen.answer_type == AnswerType.OPEN else "accuracy",
            source=SourceSpec(dataset="mini-synth", variant=name, loader="synth", rule={"pool_size": 40, "seed": 0}),
        )

    tasks = [task(t, f"g{c}") for c, ts in MINI_CLIENTS.items() for t in ts] + [task("un-similarity", "u")]
    spec = BenchmarkSpec(
        name="mini-synth",
        version="0.0.1",
        title="Mini synth",
        description="two drake-synth clients in small",
        modality="multimodal",
        tasks=tasks,
        unseen_tasks=["un-similarity"],
        clients=[ClientSpec(id=c, group=f"g{c}", tasks=ts) for c, ts in MINI_CLIENTS.items()],
        fl=FLConfig(rounds=2, local_steps=5, batch_size=4, eval_every_rounds=1, others_subsample=0),
        scenarios=ScenarioDefaults(
            default="static",
            asynchronous=AsyncDefaults(patterns=[[1, 1]]),
            dirichlet=DirichletDefaults(tasks=[t.id for t in tasks[:6]], alphas=[1.0]),
        ),
        subsampling=SubsamplingRule(large_threshold=1000, train=500, test=100, train_ratio=0.8, seed=0),
    )
    spec = parse_manifest(manifest_dict(spec), where="mini-synth")
    root = tmp_path_factory.mktemp("mini-synth") / "built"
    build_benchmark(spec, source_dir=None, out=root, show_progress=False)
    path = root.parent / "mini-synth.json"
    path.write_text(json.dumps(manifest_dict(spec)))
    return str(path), str(root)


@pytest.mark.filterwarnings("ignore:numerics 'portable' was asked for:RuntimeWarning")  # inline runs; no model
def test_answer_stuffing_does_not_beat_the_majority_prior_under_rule_2_0_and_did_under_1_0(mini_synth, tmp_path):
    from drake_bench import RunConfig, ScenarioError, evaluate_client, load_client_stream, run
    from drake_bench.evaluation.metrics import seed_summary

    manifest, root = mini_synth
    self_last: dict[tuple[str, str], float] = {}
    per_client: dict[str, float] = {}
    for version in ("1.0", "2.0"):
        for method in ("answer-stuffing", "majority-answer"):
            chosen = {"scorer_version": version} if version == "1.0" else {}  # 2.0: the default, not asked for
            res = run(
                RunConfig(
                    benchmark=manifest, data_dir=root, method=method, out=str(tmp_path / version), **MINI_RUN, **chosen
                )
            )
            assert res.evaluation.scorer_version == version == res.fl.extra["run_config"]["scorer_version"]
            self_last[method, version] = res.summary.aggregate.self_last.mean
            if method == "answer-stuffing":
                per_client[version] = next(
                    c.self_last for c in seed_summary(0, res.raw.scores).per_client if c.client == 1
                )
    stuffing, majority = (
        (self_last["answer-stuffing", "1.0"], self_last["answer-stuffing", "2.0"]),
        (self_last["majority-answer", "1.0"], self_last["majority-answer", "2.0"]),
    )
    assert stuffing[0] > majority[0] + 0.1, self_last  # recall: listing every answer beats the prior by far
    assert stuffing[1] <= majority[1], self_last  # capped F1: it does not
    assert stuffing[1] < stuffing[0] - 0.2, self_last

    # evaluate_client takes the same choice: client 1's stuffed answers score as in the run, under each rule
    stream = load_client_stream(manifest, 1, scenario="static", data_dir=root, rounds=2, local_steps=5)
    answers: list[str] = []
    for _, batches in stream.rounds():
        answers = stuffed_answers(batches, answers)

    def predict_fn(queries):  # noqa: ANN001, ANN202
        return [stuff(q, answers) for q in queries]

    for version in ("1.0", "2.0"):
        got = evaluate_client(
            manifest,
            1,
            predict_fn,
            scenario="static",
            rounds=2,
            local_steps=5,
            data_dir=root,
            others=False,
            **({"scorer_version": version} if version == "1.0" else {}),
        )
        assert got.settings.scorer_version == version
        assert got.self_score == pytest.approx(per_client[version])
    with pytest.raises(ScenarioError, match="scorer version '3.0'"):
        evaluate_client(manifest, 1, predict_fn, data_dir=root, scorer_version="3.0")


class ClaimsRecall(AnswerStuffing):
    """The attack, claiming in its evaluation settings that it was scored by rule 1.0 (only the evaluator says)."""

    meta = MethodMeta(name="claims-recall", version="1.0", summary="names a scorer version it does not choose")

    def model_identity(self, model_name: str):  # noqa: ANN201
        from drake_bench.plugins.protocol import ModelIdentity

        return ModelIdentity(architecture=model_name)

    def evaluation_settings(self) -> dict:
        return {"decoding": {}, "batch_size": 1, "prompt_template_version": "1", "scorer_version": "1.0"}


register_method(ClaimsRecall)


@pytest.mark.filterwarnings("ignore:numerics 'portable' was asked for:RuntimeWarning")
def test_a_method_cannot_choose_the_scorer_version_in_its_evaluation_settings(toy, tmp_path):
    from drake_bench import PluginError, RunConfig, run

    manifest, root = toy
    config = RunConfig(
        benchmark=manifest,
        data_dir=root,
        method="claims-recall",
        out=str(tmp_path),
        seeds=[0],
        scenario="static",
        rounds=2,
        fast_adaptation=False,
        isolation="inline",
    )
    with pytest.raises(PluginError, match=r"names scorer version '1.0', but this run scores by '2.0'"):
        run(config)
    res = run(config.model_copy(update={"scorer_version": "1.0", "out": str(tmp_path / "on-1")}))  # the run's own
    assert res.evaluation.scorer_version == "1.0"
