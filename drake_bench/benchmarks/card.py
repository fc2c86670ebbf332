"""Hub dataset card (``README.md``) of a built benchmark.

The card is what a user sees first on the Hub and what ``datasets.load_dataset``
reads to find the data, so it is generated from the manifest and ``build_info.json``
rather than written by hand:

* YAML front matter: one ``configs`` entry per task (``data_files`` for train and
  test) and one per client (its tasks' shards together), the license of every
  source, the build's hashes, and the manifest's [I]/[R] choices (so a result that
  cites the card also cites the decisions the papers left open);
* a body with client/task tables, every source's license and citation, and the
  per-file sha256 list that ``drake-bench download`` checks.

Tasks whose source forbids redistribution are published as an *index* (ids and the
source rule, no content): they get no ``configs`` entry, and clients that need them
get none either, because a config that silently lacks a task would mislead.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from pathlib import Path
from typing import Any

from drake_bench.benchmarks.spec import BenchmarkSpec, TaskSpec
from drake_bench.benchmarks.store import BUILD_INFO

CARD_FILE = "README.md"
_HUB_LICENSE_ID = re.compile(r"^[a-z0-9][a-z0-9.\-]*$")


def card_splits(spec: BenchmarkSpec) -> tuple[str, ...]:
    """The splits a version's shards hold: validation only where its subsampling rule carves one."""
    return ("train", "validation", "test") if spec.subsampling.validation_ratio > 0 else ("train", "test")


def task_config(task_id: str, splits: tuple[str, ...] = ("train", "test")) -> dict[str, Any]:
    """The ``configs`` entry of one task: its shards of each split (glob so re-sharding keeps working)."""
    return {
        "config_name": task_id,
        "data_files": [{"split": split, "path": f"data/{task_id}/{split}-*.parquet"} for split in splits],
    }


def client_config_name(client_id: int) -> str:
    return f"client_{client_id}"


def client_config(spec: BenchmarkSpec, client_id: int) -> dict[str, Any]:
    """The ``configs`` entry of one client: all its tasks' shards, in stream order."""
    tasks = spec.client(client_id).tasks
    return {
        "config_name": client_config_name(client_id),
        "data_files": [
            {"split": split, "path": [f"data/{t}/{split}-*.parquet" for t in tasks]} for split in card_splits(spec)
        ],
    }


def _sources(task: TaskSpec) -> list[Any]:
    """The sources a task's shards hold: its own, and the evaluation set its test split comes from, if any."""
    return [task.source] + ([task.test_source] if task.test_source is not None else [])


def _source_name(src: Any) -> str:
    return src.dataset + (f" ({src.variant})" if src.variant else "")


def card_licenses(tasks: list[TaskSpec]) -> str | list[str]:
    """Hub ``license`` value: the sources' license ids, or ``other`` when any is not a Hub id.

    The Hub validates this field against its license list; free-form names
    ("CC BY-NC 4.0", "unknown") would be rejected, so those are reported per task
    under ``drake_bench.tasks`` and in the body instead.
    """
    ids = sorted({src.license.strip().lower() for t in tasks for src in _sources(t)})
    if ids and all(_HUB_LICENSE_ID.match(i) and i not in {"unknown", "other"} for i in ids):
        return ids[0] if len(ids) == 1 else ids
    return "other"


def card_metadata(
    spec: BenchmarkSpec,
    info: dict[str, Any],
    index_tasks: Collection[str] = (),
) -> dict[str, Any]:
    """The YAML front matter as a plain dict (exposed for tests and for tools that read cards)."""
    built = set(info.get("sizes", {})) | set(index_tasks)
    tasks = [t for t in spec.tasks if t.id in built]
    content_tasks = [t for t in tasks if t.id not in set(index_tasks)]
    configs = [task_config(t.id, card_splits(spec)) for t in content_tasks]
    task_ids = {t.id for t in spec.tasks}
    for c in spec.clients:
        if all(t in built and t not in set(index_tasks) for t in c.tasks):
            name = client_config_name(c.id)
            if name not in task_ids:  # a task literally named client_N keeps its own config
                configs.append(client_config(spec, c.id))
    licenses = card_licenses(tasks)
    meta: dict[str, Any] = {
        "pretty_name": spec.title,
        "license": licenses,
        "tags": ["federated-learning", "personalized-federated-learning", "drake-bench", spec.modality],
        "configs": configs,
        "drake_bench": {
            "benchmark": spec.name,
            "version": spec.version,
            "manifest_hash": info.get("manifest_hash", ""),
            "data_hash": info.get("data_hash", ""),
            "content_hash": info.get("content_hash", ""),
            "build_info": BUILD_INFO,
            "embedded": spec.embedded,
            "mirrors": spec.mirrors,
            "index_tasks": sorted(index_tasks),
            "failed_tasks": sorted(info.get("failed_tasks", [])),
            "tasks": {
                t.id: {
                    "source": _source_name(t.source),
                    "license": t.source.license,
                    "redistributable": t.source.redistributable,
                    "hub_repo": t.source.hub_repo,
                    "revision": t.source.revision,
                    **(
                        {
                            "test_source": {
                                "source": _source_name(t.test_source),
                                "license": t.test_source.license,
                                "hub_repo": t.test_source.hub_repo,
                                "revision": t.test_source.revision,
                                "scorer": t.test_source.scorer,
                            }
                        }
                        if t.test_source is not None
                        else {}
                    ),
                }
                for t in tasks
            },
            "choices": [{"key": c.key, "tag": c.tag, "decision": c.decision, "reason": c.reason} for c in spec.choices],
        },
    }
    if licenses == "other":
        meta["license_name"] = "mixed-source-licenses"
        meta["license_details"] = (
            "Each task keeps its source's license; see drake_bench.tasks and the Licenses section."
        )
    return meta


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def card_body(spec: BenchmarkSpec, info: dict[str, Any], index_tasks: Collection[str] = ()) -> str:
    """Markdown body: what the benchmark is, who holds which task, licenses, choices, citations, hashes."""
    sizes = info.get("sizes", {})
    built = set(sizes) | set(index_tasks)
    lines = [f"# {spec.title}", "", spec.description, ""]
    if spec.embedded:
        lines += [
            f"Embedded synthetic benchmark (procedurally generated){f', mirroring `{spec.mirrors}`' if spec.mirrors else ''}.",
            "",
        ]
    lines += [
        "Built with drake_bench. Load one client's stream with",
        "`drake_bench.load_client_stream(...)` or fetch only what you need with",
        f"`drake-bench download {spec.name} --revision <tag> --client <id>`; every file is checked against",
        f"the sha256 recorded in `{BUILD_INFO}`.",
        "",
        "## Clients",
        "",
        "| client | group | tasks (stream order) | config |",
        "|---|---|---|---|",
    ]
    for c in spec.clients:
        has_cfg = all(t in built and t not in set(index_tasks) for t in c.tasks)
        lines.append(
            f"| {c.id} | {_cell(c.group)} | {_cell(', '.join(c.tasks))} | {client_config_name(c.id) if has_cfg else '-'} |"
        )
    lines += [
        "",
        "## Tasks",
        "",
        "| task | group / split | source | license | train | validation | test | published as |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for t in spec.tasks:
        if t.id not in built:
            continue
        s = sizes.get(t.id, {})
        how = "index (rebuild from your copy)" if t.id in set(index_tasks) else "parquet"
        src = _source_name(t.source) + (
            f"; tested on {_source_name(t.test_source)}" if t.test_source is not None else ""
        )
        lines.append(
            f"| {t.id} | {_cell(t.group)} / {_cell(t.split)} | {_cell(src)} | {_cell(t.source.license)} | "
            f"{s.get('train', '-')} | {s.get('validation', '-')} | {s.get('test', '-')} | {how} |"
        )
    if spec.subsampling.validation_ratio > 0:
        lines += [
            "",
            f"Validation: {spec.subsampling.validation_ratio:.0%} of each task's training draw, held out to "
            "select hyperparameters on (`drake-bench tune`); it is in no training stream and no board scores it.",
        ]
    if spec.unseen_tasks:
        lines += ["", f"Unseen (held-out) tasks: {', '.join(spec.unseen_tasks)}."]
    lines += ["", "## Licenses", ""]
    lines.append(
        "Each task keeps the license of its source dataset. Tasks whose license forbids redistribution are "
        "published as an index (item ids plus the source rule, no content): `drake-bench download --source-dir` "
        "rebuilds them from your own copy of the source and checks them against the index."
    )
    lines.append("")
    for t in spec.tasks:
        if t.id in built:
            flag = "" if t.source.redistributable else " (not redistributable)"
            test = (
                f"; its test split ({_cell(_source_name(t.test_source))}): {_cell(t.test_source.license)}"
                if t.test_source is not None
                else ""
            )
            lines.append(f"- `{t.id}`: {_cell(t.source.license)}{flag}{test}")
    if spec.choices:
        lines += [
            "",
            "## Choices the papers leave open",
            "",
            "[P] stated by the paper, [I] inferred, [R] drake_bench's recommendation.",
            "",
        ]
        lines += ["| key | tag | decision | reason |", "|---|---|---|---|"]
        for ch in spec.choices:
            lines.append(f"| {_cell(ch.key)} | [{ch.tag}] | {_cell(ch.decision)} | {_cell(ch.reason)} |")
    lines += ["", "## Build", ""]
    lines += [
        f"- benchmark: `{spec.name}` version `{spec.version}`",
        f"- manifest hash: `{info.get('manifest_hash', '')}`",
        f"- data hash: `{info.get('data_hash', '')}` (over the files below)",
        f"- content hash: `{info.get('content_hash', '')}` (over the data as read back, images as pixels: the same "
        "for a rebuild with other pyarrow or Pillow versions)",
        f"- storage: images `{spec.storage.images}`, Parquet `{spec.storage.parquet_compression}` (the manifest's "
        "`storage` block; shard hashes are over these bytes)",
    ]
    if info.get("failed_tasks"):
        lines.append(f"- tasks that failed to build (absent): {', '.join(info['failed_tasks'])}")
    lines += ["", "| file | sha256 |", "|---|---|"]
    for rel, digest in sorted(info.get("files", {}).items()):
        lines.append(f"| `{rel}` | `{digest}` |")
    lines += ["", "## Citation", ""]
    cites: list[str] = []
    if spec.citation:
        cites.append(spec.citation.strip())
    for t in spec.tasks:
        if t.id in built and t.source.citation and t.source.citation.strip() not in cites:
            cites.append(t.source.citation.strip())
    if cites:
        lines += ["```bibtex", "\n\n".join(cites), "```"]
    else:
        lines.append("No citation recorded in the manifest.")
    return "\n".join(lines) + "\n"


def render_card(spec: BenchmarkSpec, info: dict[str, Any], index_tasks: Collection[str] = ()) -> str:
    """The full ``README.md``: YAML front matter (via huggingface_hub's DatasetCardData) + body."""
    from huggingface_hub import DatasetCardData

    meta = card_metadata(spec, info, index_tasks)
    data = DatasetCardData(**meta)
    order = list(meta)
    return f"---\n{data.to_yaml(original_order=order)}\n---\n\n{card_body(spec, info, index_tasks)}"


def write_card(root: Path, spec: BenchmarkSpec, info: dict[str, Any], index_tasks: Collection[str] = ()) -> Path:
    """Write ``<root>/README.md`` (atomically, so an interrupted build never leaves half a card)."""
    path = Path(root) / CARD_FILE
    tmp = path.with_suffix(".md.tmp")
    tmp.write_text(render_card(spec, info, index_tasks), encoding="utf-8")
    tmp.replace(path)
    return path
