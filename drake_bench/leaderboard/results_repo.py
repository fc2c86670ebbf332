"""A board's result files as a Hugging Face Hub dataset repo: publish them, and fetch them back at a pinned revision.

Results do not have to live in the code's repository (MTEB keeps its results in a repository of their own, fetched
at a pinned revision). A results repo holds one folder per board, laid out as the board's folder under
``leaderboard/`` is (``<board>/runs/<benchmark>/<scenario>/<method>/<version>/result.json`` with its Parquet
tables, the rendered ``summary.md``, plots and page); checkpoints never go. ``drake-bench leaderboard publish``
uploads a board in one commit (``huggingface_hub``'s ``create_commit``, optionally tagged, as the benchmark data
is published), and ``drake-bench leaderboard fetch BOARD --revision REV`` downloads that folder at the commit the
revision resolves to (``snapshot_download``: the Hub cache, ``HF_HUB_OFFLINE`` and tokens behave as in any Hub
tool) into ``<root>/<board folder>``, then reads every result it fetched (each Parquet table checked against the
sha256 its result file records) and writes ``fetched.json`` (repo, revision, commit) beside them, so
``leaderboard validate``, ``render`` and ``report`` work on a fetched board as on a built one.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from drake_bench.errors import DrakeBenchError, HubError
from drake_bench.leaderboard.boards import DEFAULT_ROOT, BoardDefinition
from drake_bench.leaderboard.render import board_files
from drake_bench.results.result_file import read_result, result_files

__all__ = ["FETCH_RECORD", "REPO_TYPE", "board_payloads", "fetch_board", "publish_board"]

REPO_TYPE = "dataset"
FETCH_RECORD = "fetched.json"
"""Written into a fetched board's folder: which repo, revision and commit its files came from."""


def _published_files(board: BoardDefinition, root: Path) -> list[Path]:
    """The files of a board's folder that a results repo holds: every result file with its tables, and the pages
    rendered from them (``summary.md``, figures, ``board.html``); never a checkpoint or a hidden file."""
    folder = board.results_dir(root)
    results = board_files(folder)
    if not results:
        raise DrakeBenchError(f"board {board.name} has no result files under {folder}; build or fetch it first")
    files = {f for r in results for f in result_files(r)}
    for p in folder.rglob("*"):
        rel = p.relative_to(folder).parts
        if p.is_file() and "checkpoints" not in rel and not any(part.startswith(".") for part in rel):
            if p.suffix in (".md", ".png", ".html"):
                files.add(p)
    return sorted(files)


def board_payloads(board: BoardDefinition, root: str | Path = DEFAULT_ROOT) -> list[tuple[str, Path]]:
    """``(path in the repo, local file)`` for every file :func:`publish_board` uploads: ``<board>/<path in the
    board's folder>``."""
    folder = board.results_dir(root)
    return [(f"{board.name}/{p.relative_to(folder).as_posix()}", p) for p in _published_files(board, Path(root))]


def publish_board(
    board: BoardDefinition,
    repo_id: str,
    root: str | Path = DEFAULT_ROOT,
    *,
    revision_tag: str | None = None,
    dry_run: bool = False,
    api: Any = None,
) -> list[Any]:
    """Upload a board's folder to the Hub dataset repo ``repo_id`` in one commit; returns the commit operations.

    With ``dry_run`` nothing touches the network: the operations returned are exactly what would be uploaded.
    ``revision_tag`` tags the commit (the Hub refuses an existing tag: a published revision does not move)."""
    from huggingface_hub import CommitOperationAdd

    ops = [CommitOperationAdd(path_in_repo=rel, path_or_fileobj=str(p)) for rel, p in board_payloads(board, root)]
    if dry_run:
        return ops
    if api is None:
        from huggingface_hub import HfApi

        api = HfApi()
    from huggingface_hub.errors import HfHubHTTPError

    done = "nothing was uploaded"
    try:
        api.create_repo(repo_id, repo_type=REPO_TYPE, exist_ok=True)
        commit = api.create_commit(
            repo_id, ops, commit_message=f"drake_bench: board {board.name}", repo_type=REPO_TYPE
        )
        done = f"commit {commit.oid} was uploaded but not tagged {revision_tag!r}"
        if revision_tag:
            api.create_tag(repo_id, tag=revision_tag, revision=commit.oid, repo_type=REPO_TYPE)
    except (HfHubHTTPError, OSError) as exc:
        raise HubError(
            f"publishing board {board.name} to datasets/{repo_id} failed ({done}): {str(exc).splitlines()[0]}. "
            "Check the network and your token (write access to the repo), then run the same command again"
        ) from None
    return ops


def fetch_board(
    board: BoardDefinition,
    repo_id: str,
    revision: str,
    root: str | Path = DEFAULT_ROOT,
    *,
    cache_dir: str | Path | None = None,
    local_files_only: bool = False,
) -> Path:
    """Download board ``board``'s folder from the Hub dataset repo ``repo_id`` at ``revision`` into its folder
    under ``root``; returns that folder.

    The revision (a tag, branch or commit) is resolved once, to the snapshot's commit, which ``fetched.json``
    records. Every fetched result must read (its tables' sha256s included) before anything is copied, and a folder
    that already holds results of this board is left alone unless they came from this very commit."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError, RepositoryNotFoundError

    try:
        snapshot = Path(
            snapshot_download(
                repo_id,
                repo_type=REPO_TYPE,
                revision=revision,
                cache_dir=cache_dir,
                allow_patterns=[f"{board.name}/**"],
                local_files_only=local_files_only,
            )
        )
    except RepositoryNotFoundError:
        raise HubError(f"Hub dataset repo {repo_id!r} (or its revision {revision!r}) was not found") from None
    except LocalEntryNotFoundError:
        raise HubError(
            f"revision {revision!r} of {repo_id!r} is not in the local Hub cache and the Hub cannot be reached "
            "(or offline mode is on); fetch it once online"
        ) from None
    except (HfHubHTTPError, OSError) as exc:
        raise HubError(f"fetching board {board.name} from {repo_id}@{revision} failed: {exc}") from None
    source = snapshot / board.name
    results = board_files(source) if source.is_dir() else []
    if not results:
        raise HubError(f"{repo_id}@{revision} holds no results of board {board.name} (no {board.name}/**/result.json)")
    for r in results:
        read_result(r)  # refuses a result whose table is missing or not the one it records, by name
    commit = snapshot.name
    target = board.results_dir(root)
    record = target / FETCH_RECORD
    if board_files(target) if target.is_dir() else []:
        earlier = json.loads(record.read_text(encoding="utf-8")) if record.is_file() else {}
        if earlier.get("commit") != commit:
            raise DrakeBenchError(
                f"{target} already holds results of board {board.name} "
                f"({'fetched from ' + earlier['repo'] + '@' + earlier['commit'] if earlier else 'built here'}); "
                "move them away, or fetch into another --root"
            )
    for p in sorted(source.rglob("*")):
        if p.is_file():
            dst = target / p.relative_to(source)
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(p, dst)  # out of the Hub cache: a board folder is written to (render, validate)
    record.write_text(
        json.dumps({"repo": repo_id, "revision": revision, "commit": commit}, indent=2) + "\n", encoding="utf-8"
    )
    return target
