"""``drake-bench tune``: select a method's hyperparameters on the validation split (see drake_bench.tuning)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from drake_bench.commands import fail


def register(app: typer.Typer) -> None:
    @app.command("tune")
    def tune_cmd(
        method: Annotated[str, typer.Argument(help="Registered method name (see `drake-bench list`).")],
        grid: Annotated[
            list[str],
            typer.Option(
                "--grid",
                help="KEY=V1,V2,... of the method's config to try (repeatable: every combination runs; values "
                "read as JSON where they parse), e.g. --grid learning_rate=1e-3,3e-3,1e-2.",
            ),
        ],
        board: Annotated[
            str | None,
            typer.Option(
                help="Tune under this canonical board's run settings (benchmark version, scenario, seeds, rounds, local "
                "steps, compute matching); the run options below are then not taken."
            ),
        ] = None,
        benchmark: Annotated[
            str, typer.Option(help="Benchmark name or manifest path (without --board).")
        ] = "drake-synth",
        scenario: Annotated[str | None, typer.Option(help="Scenario; None: the manifest's default.")] = None,
        seeds: Annotated[str, typer.Option(help="Comma-separated seeds; the criterion is their mean.")] = "0",
        rounds: Annotated[int | None, typer.Option(help="Federated rounds; None: the manifest's.")] = None,
        local_steps: Annotated[int | None, typer.Option(help="Local steps per round; None: the manifest's.")] = None,
        eval_every: Annotated[int | None, typer.Option(help="Evaluate every N rounds; None: the manifest's.")] = None,
        others_subsample: Annotated[
            int | None, typer.Option(help="Others items per task; None: the manifest's.")
        ] = None,
        fast_adaptation: Annotated[bool, typer.Option(help="Also score fast adaptation on unseen tasks.")] = False,
        data_dir: Annotated[Path | None, typer.Option(help="A built benchmark folder (without --board).")] = None,
        set_: Annotated[
            list[str] | None,
            typer.Option("--set", help="Fixed method config KEY=VALUE shared by every point (repeatable)."),
        ] = None,
        criterion: Annotated[
            str,
            typer.Option(
                help="Summary metric to maximise: self_last, self_auc, others_last, "
                "others_auc, unseen_last, unseen_auc, worst_client_self."
            ),
        ] = "self_last",
        out: Annotated[
            Path, typer.Option(help="Folder of the tuning record (tuning.json) and each point's run.")
        ] = Path("tuning"),
    ) -> None:
        """Run METHOD at every point of a grid, scored on the benchmark's validation split, and write the tuning record.

        Each point is a full run through the standard evaluator (resumable); the record holds every point's score
        per seed and the point selected. Then `drake-bench run --methods METHOD --tuning-record OUT/tuning.json` runs
        the selected values on the test split, and its result records where they came from."""
        from drake_bench.commands.run import int_list, method_settings
        from drake_bench.errors import DrakeBenchError
        from drake_bench.evaluator.run_config import RunConfig
        from drake_bench.tuning import RECORD_FILE, parse_grid, tune

        try:
            parsed = parse_grid(grid)
            fixed = method_settings(set_ or [], [method])[method]  # tune() validates every point's config
            if board is not None:
                from drake_bench.leaderboard.boards import load_board
                from drake_bench.leaderboard.build import board_run_config

                config = board_run_config(load_board(board), method, fixed, out)
            else:
                config = RunConfig(
                    benchmark=benchmark,
                    scenario=scenario,
                    method=method,
                    seeds=int_list(seeds),
                    rounds=rounds,
                    local_steps=local_steps,
                    eval_every_rounds=eval_every,
                    others_subsample=others_subsample,
                    fast_adaptation=fast_adaptation,
                    data_dir=str(data_dir) if data_dir else None,
                    method_config=fixed,
                    out=str(out),
                )
            record = tune(config, parsed, criterion=criterion, out=out)
        except DrakeBenchError as exc:
            raise fail(exc) from None
        width = max(len(str(p.settings)) for p in record.points)
        typer.echo(
            f"{method} on {record.benchmark} {record.benchmark_version} ({record.scenario}), validation "
            f"split, {record.criterion} x100, mean over seeds {record.seeds}:"
        )
        for p in record.points:
            mark = "  <- selected" if p.settings == record.selected else ""
            score = "-" if p.score is None else f"{100 * p.score:.2f}"
            typer.echo(f"  {str(p.settings):<{width}}  {score}{mark}")
        typer.echo(f"wrote {out / RECORD_FILE}")
