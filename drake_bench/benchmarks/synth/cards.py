"""Task cards: description, answer type, provenance, learnability numbers and a rendered example grid.

Examples come straight from the task's source loader (no build needed), so a card can be
drawn for any task of any benchmark whose source is available; for embedded benchmarks
that is always.
"""

from __future__ import annotations

import json
import textwrap
from importlib import resources
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw

from drake_bench.benchmarks.manifest import load_benchmark
from drake_bench.benchmarks.sample import Sample
from drake_bench.benchmarks.spec import BenchmarkSpec, TaskSpec
from drake_bench.benchmarks.synth.render import font

CELL = 112
LEARNABILITY_FILE = "learnability.json"


def examples(spec: BenchmarkSpec, task: TaskSpec, n: int = 4) -> list[Sample]:
    """The first ``n`` items of the task's candidate pool."""
    from drake_bench.loaders import get_loader

    out: list[Sample] = []
    for s in get_loader(task.source.loader).load(task, None):
        out.append(s)
        if len(out) >= n:
            break
    return out


def render_grid(benchmark: str | BenchmarkSpec, task_id: str, n: int = 4) -> Image.Image:
    """One row per example: its images (upscaled, nearest) then the question, options and answer."""
    spec = load_benchmark(benchmark)
    task = spec.task(task_id)
    items = examples(spec, task, n)
    max_imgs = max([len(s.images) for s in items] + [0])
    text_w = 330
    width = max_imgs * (CELL + 4) + text_w + 8
    row_h = CELL + 8
    header = 26
    canvas = Image.new("RGB", (width, header + row_h * len(items)), (255, 255, 255))
    draw = ImageDraw.Draw(canvas)
    draw.text((6, 6), f"{spec.name} / {task.id}  ({task.answer_type.value})", fill=(0, 0, 0), font=font(13))
    for r, s in enumerate(items):
        y = header + r * row_h
        for k, im in enumerate(s.images):
            canvas.paste(im.convert("RGB").resize((CELL, CELL), Image.NEAREST), (4 + k * (CELL + 4), y))
        lines = textwrap.wrap(s.question, 48)
        if s.choices:
            lines += textwrap.wrap("options: " + " | ".join(s.choices), 48)
        lines += textwrap.wrap("answer: " + s.answer, 48)
        x = 8 + max_imgs * (CELL + 4)
        for j, line in enumerate(lines[:8]):
            draw.text(
                (x, y + 2 + 13 * j), line, fill=(0, 0, 110) if line.startswith("answer") else (0, 0, 0), font=font(11)
            )
    return canvas


def learnability() -> dict[str, Any]:
    """Numbers written by scripts/bench_synth_learnability.py (empty when never run)."""
    res = resources.files("drake_bench.benchmarks.synth").joinpath(LEARNABILITY_FILE)
    try:
        return json.loads(res.read_text())
    except FileNotFoundError:
        return {}


def task_card(benchmark: str | BenchmarkSpec, task_id: str) -> str:
    """Markdown card of one task."""
    spec = load_benchmark(benchmark)
    t = spec.task(task_id)
    clients = [c.id for c in spec.clients if t.id in c.tasks]
    where = (
        f"client {clients[0]}, position {spec.client(clients[0]).tasks.index(t.id) + 1}"
        if clients
        else ("unseen task (fast adaptation only)" if t.id in spec.unseen_tasks else "not assigned")
    )
    lines = [
        f"# {spec.name} / {t.id}",
        "",
        t.description,
        "",
        f"- name: {t.name}",
        f"- group / split: {t.group} / {t.split}",
        f"- placement: {where}",
        f"- images per item: {t.images} {t.num_images[0]}-{t.num_images[1]}",
        f"- answer type: {t.answer_type.value} (metric: {t.metric})",
        f"- sizes at scale 1: train {t.sizes.train}, "
        + (f"validation {t.sizes.validation}, " if t.sizes.validation else "")
        + f"test {t.sizes.test}",
        f"- source: loader `{t.source.loader}`, generator `{t.source.variant}`, rule `{json.dumps(t.source.rule, sort_keys=True)}`",
        f"- provenance: {', '.join(f'{k} [{v}]' for k, v in sorted(t.provenance.items())) or 'n/a'}",
    ]
    res = learnability().get("tasks", {}).get(f"{spec.name}/{t.id}")
    if res:
        lines.append(
            f"- learnability ({res['train']} train / {res['test']} test items): image+question model "
            f"{res['vision']:.2f}, text-only model {res['text_only']:.2f}, chance {res['chance']:.2f} ({res['metric']})"
            + ("" if res.get("learnable", True) else "; not learnt by any probe run")
        )
        measured, built = res.get("generator_version"), t.source.rule.get("generator_version")
        if measured is not None and built is not None and measured != built:
            lines.append(
                f"- note: learnability was measured on this task's generator version {measured} data; this "
                f"manifest builds version {built} (benchmark {spec.name}@{spec.version})"
            )
        if res.get("confirm"):
            c = res["confirm"]
            lines.append(
                f"- held-out confirmation ({c['test']} items never used to select a probe): image+question model "
                f"{c['vision']:.2f}, text-only model {c['text_only']:.2f}, chance {c['chance']:.2f}"
            )
    else:
        lines.append("- learnability: not measured (run scripts/bench_synth_learnability.py)")
    ex = examples(spec, t, 2)
    if ex:
        lines += ["", "Examples:"]
        for s in ex:
            opts = f" [{' | '.join(s.choices)}]" if s.choices else ""
            lines.append(
                f"- ({len(s.images)} image{'s' if len(s.images) != 1 else ''}) {s.question}{opts} -> **{s.answer}**"
            )
    return "\n".join(lines) + "\n"


ANSWER_ABBREV = {"multiple_choice": "MC", "yes_no": "Y/N", "open": "open", "free_text": "text"}
TABLE_START, TABLE_END = "<!-- task-table:{name}:start -->", "<!-- task-table:{name}:end -->"


def task_table(benchmark: str | BenchmarkSpec) -> str:
    """The short per-client task table docs/benchmarks.md shows (generated, so it cannot drift from the manifest).

    One row per client (its tasks in stream order, each with answer type and images per item), one for
    the unseen tasks; ``learnt`` counts the image tasks the learnability script shows learnable and
    needing the image (docs/synth_tasks.md has the numbers)."""
    spec = load_benchmark(benchmark)
    res = learnability().get("tasks", {})

    def cell(tid: str) -> str:
        t = spec.task(tid)
        lo, hi = t.num_images
        imgs = "" if hi == 0 else f", {lo} img" if lo == hi else f", {lo}-{hi} img"
        return f"`{tid}` ({ANSWER_ABBREV.get(t.answer_type.value, t.answer_type.value)}{imgs})"

    def learnt(ids: list[str]) -> str:
        rows = [res.get(f"{spec.name}/{t}") for t in ids]
        return f"{sum(bool(r and r.get('learnable')) for r in rows)}/{len(ids)}"

    lines = ["| client | group | tasks in stream order (answer type, images per item) | learnt |", "|---|---|---|---|"]
    for c in spec.clients:
        lines.append(f"| {c.id} | {c.group} | {' · '.join(cell(t) for t in c.tasks)} | {learnt(list(c.tasks))} |")
    if spec.unseen_tasks:
        lines.append(
            f"| unseen | fast adaptation | {' · '.join(cell(t) for t in spec.unseen_tasks)} "
            f"| {learnt(list(spec.unseen_tasks))} |"
        )
    return "\n".join(lines) + "\n"


def replace_task_table(text: str, benchmark: str) -> str:
    """``text`` with the generated table of ``benchmark`` between its marker comments (docs/benchmarks.md upkeep)."""
    start, end = TABLE_START.format(name=benchmark), TABLE_END.format(name=benchmark)
    if start not in text or end not in text:
        raise ValueError(f"no {start} ... {end} block to fill")
    head, rest = text.split(start, 1)
    return head + start + "\n" + task_table(benchmark) + end + rest.split(end, 1)[1]


def render_clients(benchmark: str | BenchmarkSpec, per_task: int = 2) -> Image.Image:
    """One row per client: the first image of the first ``per_task`` items of each of its tasks, labelled with the
    client's group, so a client's visual domain and its group's shared look can be seen at a glance."""
    spec = load_benchmark(benchmark)
    cell, label_w, header = 64, 150, 22
    n_tasks = max(len(c.tasks) for c in spec.clients)
    width = label_w + n_tasks * (per_task * (cell + 2) + 8)
    canvas = Image.new("RGB", (width, header + len(spec.clients) * (cell + 6)), (255, 255, 255))
    draw = ImageDraw.Draw(canvas)
    draw.text(
        (6, 4),
        f"{spec.name} {spec.version}: first images of each client's tasks, in stream order",
        fill=(0, 0, 0),
        font=font(12),
    )
    for r, c in enumerate(spec.clients):
        y = header + r * (cell + 6)
        draw.text((6, y + cell // 2 - 14), f"client {c.id}", fill=(0, 0, 0), font=font(12))
        draw.text((6, y + cell // 2 + 2), c.group, fill=(90, 90, 90), font=font(11))
        for k, tid in enumerate(c.tasks):
            x = label_w + k * (per_task * (cell + 2) + 8)
            for j, s in enumerate(examples(spec, spec.task(tid), per_task)):
                canvas.paste(s.images[0].convert("RGB").resize((cell, cell), Image.NEAREST), (x + j * (cell + 2), y))
    return canvas


def write_cards(benchmark: str, out: str | Path, n: int = 4) -> list[Path]:
    """Write ``<task>.md`` and ``<task>.png`` (image benchmarks) for every task into ``out``, and for an image
    benchmark ``clients.png`` (:func:`render_clients`)."""
    spec = load_benchmark(benchmark)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for t in spec.tasks:
        md = out / f"{t.id}.md"
        md.write_text(task_card(spec, t.id))
        written.append(md)
        if spec.modality == "multimodal":
            png = out / f"{t.id}.png"
            render_grid(spec, t.id, n).save(png)
            written.append(png)
    if spec.modality == "multimodal" and spec.clients and spec.clients[0].tasks:
        render_clients(spec).save(out / "clients.png")
        written.append(out / "clients.png")
    return written
