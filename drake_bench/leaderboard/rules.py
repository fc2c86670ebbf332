"""The board's rules, in code: what a result file must satisfy to be ranked on a board.

Each rule has a name (:data:`RULES` says what it demands and why); :func:`validate` returns one
:class:`Refusal` per broken rule and file, naming both, so a refused submission says exactly what to fix. The rules
are the lessons of the benchmarks before us: numbers from the evaluator only (recomputed from the raw tables), a
fixed seed set (FedScale), the data and weights pinned by hash (lm-eval's task hashes), last-round scores and never
a selected best round, the test split never read by the method (WILDS), a communication budget measured, not
declared (FlowerTune).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from drake_bench.evaluator.access import DATA_ACCESS_KEY
from drake_bench.evaluation.compute import PROBE_VERSION, probe_is_current, recorded_probe_version
from drake_bench.backends.confine import SANDBOX, SANDBOX_KEY
from drake_bench.errors import DrakeBenchError
from drake_bench.results.result_file import (PREDICT_CALLS_KEY, WEIGHTS_SHA256, RunResult, benchmark_differences, check_result,
                       provenance_problems, read_result, weights_conflicts)
from drake_bench.leaderboard.boards import MIN_SEEDS, BoardDefinition

RULES: dict[str, str] = {
    "schema": "the file is a result file: valid JSON that validates against drake_bench/schemas/result.schema.json",
    "recompute": "the summary recomputes from the raw tables (headline numbers cannot be edited)",
    "complete": "status 'complete' and the raw tables hold every row the benchmark, scenario, seeds and rounds "
                "require (rows cannot be dropped to move a mean)",
    "provenance": "data and manifest hashes, method version, scenario object, checkpoints and library versions present",
    "seeds": f"the seed set is exactly the board's (at least {MIN_SEEDS} fixed seeds)",
    "last-round": "A_last is the score after the board's last round (evaluated at it for every seed), never a "
                  "best round selected afterwards",
    "settings": "rounds, local steps, evaluation schedule, Others subsample and fast-adaptation settings are the "
                "board's, free text is scored by the offline rule (no LLM judge: evaluation.judge empty) and each "
                "client is asked once per (owner, task) group (no evaluation.extra.predict_calls)",
    "compute-matched": "on a compute-matched board, the run carries the evaluator's current compute probe and ran the local "
                       "steps it matched to SFT's training FLOPs at the board's steps",
    "numerics": "the run's floating-point setting (run_config.numerics; none recorded: 'native') is the board's, so "
                "every row rebuilds to its digits on one kind of host",
    "scorer": "the answers were scored by the board's scoring rules (evaluation.scorer_version; none recorded: "
              "'1.0'), so every row is on one scale: open answers by token F1 (2.0) and by token recall (1.0) differ",
    "benchmark": "benchmark name, version, manifest hash and data hash are the board's, or the content hash is where "
                 "other pyarrow / Pillow versions wrote the files (and the same data in every file)",
    "scenario": "scenario and model allocation are the board's",
    "weights": "every model's weights_sha256 is the board's pinned zoo weights (and one model has one weights)",
    "method-config": "the method's name, version and full config are recorded; the settings given agree with it",
    "unique": "a method name + version + settings appears once on a board, and no run appears under two names",
    "isolation": "the method ran in its own process (run isolation 'process'), seeing only what the protocol gives",
    "sandbox": "on a board that requires it, the method's worker ran confined (fl.extra.sandbox 'namespaces'): it "
               "could read no benchmark file, checkpoint or result",
    "test-split": "the evaluator recorded, per seed, that the method was handed no test item with its answer",
    "selection": "the run was scored on the test split (run_config.scored_split; a tuning run scores validation), "
                 "and its hyperparameters were not selected on test items (run_config.selection.split)",
    "budget": "mean bytes (uplink + downlink) per client and round, as measured, within the board's budget",
    "submission": "a submission folder names its board, method, version, package, source URL or wheel hash and "
                  "command, and its files are the ones it lists (sha256)",
}


@dataclass(frozen=True)
class Refusal:
    """One broken rule in one file."""

    rule: str
    file: str
    message: str

    def __str__(self) -> str:
        return f"[{self.rule}] {self.file}: {self.message}"


def summarise(refusals: Sequence[Refusal]) -> list[str]:
    """One line per broken rule, in :data:`RULES` order: how many refusals it holds and the first of them.

    One edited number breaks dozens of values derived from it (every mean, std and per-task score the summary
    recomputes from the raw tables), so a refusal listed line by line buries the other rules a file breaks under
    them; a count per rule with its first refusal says what to fix (``validate --verbose`` lists every line)."""
    by_rule: dict[str, list[Refusal]] = {}
    for r in refusals:
        by_rule.setdefault(r.rule, []).append(r)
    order = {rule: i for i, rule in enumerate(RULES)}
    lines = []
    for rule, group in sorted(by_rule.items(), key=lambda kv: order.get(kv[0], len(order))):
        n, files = len(group), len({r.file for r in group})
        what = (f"{n} derived value{'s differ' if n > 1 else ' differs'} from the raw tables" if rule == "recompute"
                else f"{n} refusal{'s' if n > 1 else ''}")
        lines.append(f"[{rule}] {what}{f' in {files} files' if files > 1 else ''} "
                     f"(first: {group[0].file}: {group[0].message})")
    return lines


def _run_config(res: RunResult) -> dict[str, Any]:
    return dict(res.fl.extra.get("run_config") or {})


def data_refusal(board: BoardDefinition, data_hash: str | None, content_hash: str | None) -> str | None:
    """Why data with these hashes is not the board's (the `benchmark` rule's data part); None when it is.

    The data hash is over the shard files' bytes, which carry the pyarrow and Pillow versions that wrote them, so
    the same data built with other versions is recognised by its content hash (``store.content_digest``)."""
    if not board.data_hash:
        return (f"board {board.name} pins no data hash yet, so nothing shows this file ran on its data; "
                f"pin the one its build recorded ({data_hash}) in the board's definition")
    if data_hash != board.data_hash:
        if board.content_hash is None:
            return f"benchmark.data_hash {data_hash}, the board's is {board.data_hash}"
        if content_hash is None:
            return (f"benchmark.data_hash {data_hash}, the board's is {board.data_hash}, and no content hash shows "
                    "the same data built by other library versions (a file or build made before drake_bench "
                    "recorded it: rerun, or rebuild the data)")
        if content_hash != board.content_hash:
            return (f"benchmark.content_hash {content_hash}, the board's is {board.content_hash} (and data_hash "
                    f"{data_hash}, the board's is {board.data_hash}): other data")
    elif board.content_hash is not None and content_hash not in (None, board.content_hash):
        return (f"benchmark.content_hash {content_hash}, the board's is {board.content_hash}, although the data "
                "hash is the board's: the file contradicts itself")
    return None


def build_standing(benchmark: str, version: str, data_hash: str, content_hash: str | None) -> list[str]:
    """One line per canonical board on ``benchmark`` ``version``: whether runs on a build with these hashes count
    on it, and by which hash. Said right after a build, before hours of runs a board would refuse."""
    from drake_bench.leaderboard.boards import canonical_boards

    lines = []
    for board in canonical_boards().values():
        if (board.benchmark_name, board.benchmark_version) != (benchmark, version):
            continue
        why = data_refusal(board, data_hash, content_hash)
        if why is not None:
            lines.append(f"board {board.name}: runs on this build would be refused ({why})")
        elif data_hash == board.data_hash:
            lines.append(f"board {board.name}: runs on this build count (its data hash)")
        else:
            lines.append(f"board {board.name}: runs on this build count (its content hash; the files' bytes differ, "
                         "as other pyarrow or Pillow versions write them)")
    return lines


def file_refusals(path: str | Path, res: RunResult, board: BoardDefinition) -> list[Refusal]:
    """Every rule one result file breaks on ``board`` (rules about several files: :func:`validate`)."""
    out: list[Refusal] = []

    def refuse(rule: str, message: str) -> None:
        out.append(Refusal(rule, str(path), message))

    # recompute / complete / provenance: check_result's problems, told apart by which check produced them
    problems = check_result(res)
    prov = set(provenance_problems(res))
    for p in problems:
        if p.startswith("summary"):
            refuse("recompute", p)
        elif p in prov:
            refuse("provenance", p)
        else:
            refuse("complete", p)
    if res.status != "complete":
        refuse("complete", f"status {res.status!r}: {'; '.join(res.notes) or 'a seed did not finish'}")

    if sorted(res.seeds) != board.seeds:
        refuse("seeds", f"seeds {sorted(res.seeds)}, but the board's seeds are {board.seeds}")
    if len(set(res.seeds)) < MIN_SEEDS:
        refuse("seeds", f"{len(set(res.seeds))} seed(s); a ranked entry needs at least {MIN_SEEDS}")

    fl = res.fl
    if not fl.eval_rounds or fl.eval_rounds[-1] != fl.rounds:
        refuse("last-round", f"fl.eval_rounds {fl.eval_rounds} do not end at the last round {fl.rounds}")
    for s in res.summary.per_seed:
        if not s.eval_rounds or s.eval_rounds[-1] != fl.rounds:
            refuse("last-round", f"seed {s.seed}: evaluated after rounds {s.eval_rounds}, not after the last round "
                                 f"{fl.rounds}; A_last must be the last round's score")
    rc = _run_config(res)
    if not rc:
        refuse("settings", "fl.extra.run_config missing: the run's settings cannot be checked")
    wanted = {"rounds": board.rounds, "local_steps": board.local_steps, "eval_every_rounds": board.eval_every_rounds}
    got = {"rounds": fl.rounds, "local_steps": fl.local_steps, "eval_every_rounds": fl.eval_every_rounds}
    if board.compute_matched:  # the steps are the evaluator's FLOP-matched ones, recorded with the probe
        wanted.pop("local_steps")
        probe = fl.extra.get("compute") or {}
        if not probe:
            refuse("compute-matched", "fl.extra.compute missing: the board compares methods at SFT's measured "
                                      "training FLOPs, and this run was not probed (run with --compute-matched)")
        elif not probe_is_current(res):
            version = recorded_probe_version(probe)
            refuse("compute-matched", f"priced by compute probe version {version}, the evaluator's is "
                                      f"{PROBE_VERSION}; `drake-bench leaderboard reprobe` keeps it if the current probe "
                                      "matches the steps it ran, else it must be rerun")
        elif probe.get("local_steps") != board.local_steps or fl.local_steps != probe.get("matched_local_steps"):
            refuse("compute-matched", f"fl.local_steps {fl.local_steps} is not the probe's matched "
                                      f"{probe.get('matched_local_steps')} for the board's {board.local_steps} steps")
    for k, v in wanted.items():
        if got[k] != v:
            refuse("settings" if k != "rounds" else "last-round", f"fl.{k} {got[k]}, the board's is {v}")
    others = board.others_subsample if board.others_subsample is not None else board.spec.fl.others_subsample
    if fl.others_subsample != others:
        refuse("settings", f"fl.others_subsample {fl.others_subsample}, the board's is {others}")
    if rc:
        checks = {"compute_matched": board.compute_matched, "fast_adaptation": board.fast_adaptation,
                  "self_subsample": None, "batch_size": None, "fast_adaptation_iters": None,
                  "fast_adaptation_eval_every": None}
        if board.fast_adaptation:
            checks["fast_adaptation_tasks"] = board.adaptation_task_list
        for k, v in checks.items():
            if rc.get(k) != v:
                refuse("settings", f"run_config.{k} {rc.get(k)!r}, the board's is {v!r}")
        if res.evaluation.extra.get(PREDICT_CALLS_KEY):
            refuse("settings", f"evaluation.extra.{PREDICT_CALLS_KEY} {res.evaluation.extra[PREDICT_CALLS_KEY]!r}: "
                               "the board's runs ask each client once per (owner, task) group, and a call's batch "
                               "sets the padding its answers are decoded with")
        if res.evaluation.judge is not None:  # a judge's ratings do not rerun offline, and no board is judged
            refuse("settings", f"evaluation.judge {res.evaluation.judge!r}: a board scores free text with Rouge-L, "
                               "which anyone can rerun offline")
        numerics = res.numerics or "native"  # every run before the setting existed computed natively
        if numerics != board.numerics:
            refuse("numerics", f"run_config.numerics {numerics!r}, the board's is {board.numerics!r}: the digits of "
                               "one board must rebuild on one kind of host (drake_bench/core/numerics.py)")

    scorer = res.evaluation.scorer_version  # a file that records none reads as 1.0 (results.EvaluationSettings)
    if scorer != board.scorer_version:
        refuse("scorer", f"scored by rules {scorer!r} (evaluation.scorer_version), the board's are "
                         f"{board.scorer_version!r}: open answers score differently under them "
                         f"(drake_bench/evaluation/scoring.py); rerun with --scorer-version {board.scorer_version}")

    b = res.benchmark
    if b.name != board.benchmark_name or b.version != board.benchmark_version:
        refuse("benchmark", f"benchmark {b.name} {b.version}, the board's is {board.benchmark_name} {board.benchmark_version}")
    if board.expected_manifest_hash and b.manifest_hash != board.expected_manifest_hash:
        refuse("benchmark", f"benchmark.manifest_hash {b.manifest_hash}, the board's is {board.expected_manifest_hash}")
    if (why := data_refusal(board, b.data_hash, b.content_hash)) is not None:
        refuse("benchmark", why)

    if res.scenario.tag != board.scenario_tag:
        refuse("scenario", f"scenario {res.scenario.tag!r}, the board's is {board.scenario_tag!r}")
    if res.model_allocation.name != board.allocation_name:
        refuse("scenario", f"model allocation {res.model_allocation.name!r}, the board's is {board.allocation_name!r}")

    for model, ident in sorted(res.model_allocation.checkpoints.items()):
        if model == "none" and ident.get("source") == "none":
            continue  # a benchmark without model allocations, or a model-free method: no weights to pin
        pinned, sha = board.weights.get(model), ident.get(WEIGHTS_SHA256)
        if pinned is None:
            refuse("weights", f"model {model!r} is not one of the board's zoo models {sorted(board.weights) or '(none)'}")
        elif sha != pinned:
            shown = sha or "(none recorded: pretrained locally, or before the zoo shipped pinned weights)"
            refuse("weights", f"model {model!r}: weights_sha256 {shown}, the board's is {pinned}")

    m = res.method
    if "config" not in m.model_fields_set or not isinstance(m.config, dict):
        refuse("method-config", "method.config missing: the method's full configuration must be recorded")
    if m.version in ("", "unknown"):
        refuse("method-config", f"method.version {m.version!r}")
    for k, v in res.method_settings.items():
        if m.config.get(k) != v:
            refuse("method-config", f"setting {k}={v!r} was given, but method.config records {k}={m.config.get(k)!r}")

    if rc.get("isolation", "process") != "process":
        refuse("isolation", f"run_config.isolation {rc.get('isolation')!r}; boards take only 'process' runs")
    if board.sandbox and fl.extra.get(SANDBOX_KEY) != SANDBOX:
        refuse("sandbox", f"fl.extra.sandbox {fl.extra.get(SANDBOX_KEY)!r}: the board takes only runs whose method "
                          f"worker could not read the benchmark's files ({SANDBOX!r}; a kernel without unprivileged "
                          "namespaces records 'none')")

    if rc.get("scored_split", "test") != "test":
        refuse("selection", f"run_config.scored_split {rc.get('scored_split')!r}: a tuning run, scored on the "
                            "validation split; boards rank test scores (rerun with the selected values)")
    selection = rc.get("selection")
    if isinstance(selection, dict) and selection.get("split") != "validation":
        refuse("selection", f"run_config.selection.split {selection.get('split')!r}: the hyperparameters were "
                            "selected on test items; select them on the validation split (drake-bench tune)")

    access = fl.extra.get(DATA_ACCESS_KEY)
    if not isinstance(access, dict):
        refuse("test-split", "fl.extra.data_access missing: no evaluator record that the test split was never read by "
                             "the method (result files written before drake_bench recorded it must be rerun)")
    else:
        for seed in sorted(res.seeds):
            rec = access.get(str(seed))
            if not isinstance(rec, dict) or rec.get("recorded_by") != "evaluator":
                refuse("test-split", f"seed {seed}: no evaluator record of what the method was handed")
            elif rec.get("queried_items_given_with_answers") != 0:
                refuse("test-split", f"seed {seed}: {rec.get('queried_items_given_with_answers')} scored item(s) were "
                                     "handed to the method with their answers")
            elif not rec.get("queries_without_answers"):
                refuse("test-split", f"seed {seed}: the record shows no scored queries")

    if board.communication_budget_bytes is not None:
        for seed in sorted(res.seeds):
            costs = [c for c in res.raw.costs if c.seed == seed]
            if costs:
                per = sum(c.uplink_bytes + c.downlink_bytes for c in costs) / len(costs)
                if per > board.communication_budget_bytes:
                    refuse("budget", f"seed {seed}: {per:,.0f} bytes per client and round (uplink + downlink, measured), "
                                     f"the board's budget is {board.communication_budget_bytes:,.0f}")
    return out


def read_for_board(path: str | Path) -> tuple[RunResult | None, list[Refusal]]:
    """A result file read and schema-checked, or the ``schema`` refusal that says why it cannot be."""
    try:
        return read_result(path), []
    except DrakeBenchError as exc:
        return None, [Refusal("schema", str(path), str(exc).split("\n", 1)[-1].strip() or str(exc))]


def validate(paths: Sequence[str | Path], board: BoardDefinition) -> tuple[list[tuple[str, RunResult]], list[Refusal]]:
    """Every result file against ``board``'s rules and against each other; returns the readable results and every
    refusal (empty: all of them may be ranked on the board)."""
    refusals: list[Refusal] = []
    results: list[tuple[str, RunResult]] = []
    for p in paths:
        res, why = read_for_board(p)
        refusals += why
        if res is not None:
            refusals += file_refusals(p, res, board)
            results.append((str(p), res))
    # across files: one data (down to the shards both verified), one weights per model name, each entry once
    if results:
        first_path, first = results[0]
        for p, res in results[1:]:
            differs = benchmark_differences(first.benchmark, res.benchmark)
            if differs:
                refusals.append(Refusal("benchmark", p, f"not the data of {first_path}: {'; '.join(differs)}"))
    for conflict in weights_conflicts(results):
        refusals.append(Refusal("weights", "(two files, named in the message)", conflict))
    seen_label: dict[str, str] = {}
    seen_raw: dict[str, str] = {}
    for p, res in results:
        if res.label in seen_label:
            refusals.append(Refusal("unique", p, f"{res.label} is already on the board from {seen_label[res.label]}"))
        seen_label.setdefault(res.label, p)
        raw = hashlib.sha256(res.raw.model_dump_json().encode()).hexdigest()
        if raw in seen_raw:
            refusals.append(Refusal("unique", p, f"the same raw tables as {seen_raw[raw]} (one run under two names?)"))
        seen_raw.setdefault(raw, p)
    return results, refusals
