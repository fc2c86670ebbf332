"""Fixture writers: tiny copies of each real source in its publisher's format, satisfying each task's rule.

``write_fixtures(spec, root, per_task)`` writes, for every task of ``spec``, ``per_task`` items that its
partition rule selects, plus decoy items that the rule must reject, into ``root`` laid out as each
loader documents. Shared files (one M4-Instruct annotation, one IconQA problems.json ...) collect
the items of every task that reads them.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from PIL import Image

from drake_bench.loaders._common import in_half, root_name
from drake_bench.sample import AnswerType
from drake_bench.spec import BenchmarkSpec, TaskSpec

MC, YN, OPEN = AnswerType.MULTIPLE_CHOICE, AnswerType.YES_NO, AnswerType.OPEN


def png(path: Path, shade: int = 0) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        Image.new("RGB", (8, 8), ((shade * 37) % 256, (shade * 91) % 256, 128)).save(path)


def _dump(path: Path, obj: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))


def _jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


# ----------------------------------------------------------------------------- LLaVA / Mantis
def _llava_qa(task: TaskSpec, i: int) -> tuple[str, str]:
    rule = task.source.rule
    word = rule.get("question_contains", "")
    if rule.get("question_type") == "how_what":
        return f"How is the {word} sharpness of this image?\nA. high\nB. low", "A"
    if task.answer_type == YN:
        return f"Is the {word} consistent across these images?", "Yes" if i % 2 else "No"
    if task.answer_type == MC:
        return f"Which option fits the {word} images best?\nA. first\nB. second\nC. third", "(B)"
    return f"Describe the {word} change.", f"make it brighter {i}"


def _llava_records(task: TaskSpec, n: int, img_prefix: str) -> list[dict]:
    rule = task.source.rule
    k = rule.get("num_images", max(1, task.num_images[0]))
    recs, j = [], 0
    while len(recs) < n:
        rid = f"{task.id}-{j}"
        j += 1
        if "half" in rule and not in_half(rid, rule["half"], rule.get("seed", 0)):
            continue
        q, a = _llava_qa(task, j)
        imgs = [f"{img_prefix}/{rid}-{m}.png" for m in range(k)]
        rec = {"id": rid, "image": imgs, "conversations": [
            {"from": "human", "value": "<image>" * k + "\n" + q}, {"from": "gpt", "value": a}]}
        if "dataset" in rule:
            rec["metadata"] = {"dataset": rule["dataset"], "split": "train", "num_sample": n, "task_instruction": ["Answer."]}
        recs.append(rec)
    return recs


def write_llava(tasks: list[TaskSpec], root: Path, n: int) -> None:
    files: dict[Path, list[dict]] = defaultdict(list)
    mantis: dict[Path, list[dict]] = defaultdict(list)
    for t in tasks:
        base = root / root_name(t)
        if "config" in t.source.rule:
            folder = base / t.source.rule["config"]
            for r in _llava_records(t, n, "images"):
                for p in r["image"]:
                    png(folder / p, len(mantis[folder]))
                conv = [{"role": "user" if c["from"] == "human" else "assistant", "content": c["value"]} for c in r["conversations"]]
                mantis[folder].append({"id": r["id"], "images": [{"bytes": None, "path": p} for p in r["image"]],
                                       "conversation": conv, "source": t.source.rule["config"]})
        else:
            prefix = t.source.rule.get("dataset", t.source.subset or "imgs")
            recs = _llava_records(t, n, prefix)
            for r in recs:
                for p in r["image"]:
                    png(base / p, len(files[base / t.source.rule["annotation"]]))
            files[base / t.source.rule["annotation"]].extend(recs)
    filtered = {root / root_name(t) / t.source.rule["annotation"] for t in tasks if "dataset" in t.source.rule}
    for path, recs in files.items():
        if path not in filtered:
            _dump(path, recs)
            continue
        decoy = {"id": "decoy-0", "image": ["decoy/x.png"], "metadata": {"dataset": "SomethingElse"},
                 "conversations": [{"from": "human", "value": "<image>\nIs it?"}, {"from": "gpt", "value": "Yes"}]}
        png(path.parent / "decoy/x.png")
        _dump(path, recs + [decoy])
    import pyarrow as pa
    import pyarrow.parquet as pq

    for folder, rows in mantis.items():
        pq.write_table(pa.Table.from_pylist(rows), folder / "train-00000-of-00001.parquet")


# ----------------------------------------------------------------------------- SEED-Bench-2
def write_seed(tasks: list[TaskSpec], root: Path, n: int) -> None:
    types, qs = {"Scene Understanding": 1}, []
    base = root / root_name(tasks[0])
    for t in tasks:
        for d in t.source.rule["dimensions"]:
            types.setdefault(d, len(types) + 1)
        for i in range(n):
            tid = types[t.source.rule["dimensions"][i % len(t.source.rule["dimensions"])]]
            if t.images == "multi":
                for f in range(12):
                    png(base / "frames" / f"{t.id}-{i}" / f"{f:03d}.png", f)
                data_id = f"frames/{t.id}-{i}"
            else:
                data_id = f"img/{t.id}-{i}.jpg"
                png(base / data_id, i)
            qs.append({"question_id": f"{t.id}-{i}", "question": f"What is shown? ({i})", "choice_a": "a cat", "choice_b": "a dog",
                       "choice_c": "a car", "choice_d": "a tree", "answer": "ABCD"[i % 4], "question_type_id": tid, "data_id": data_id,
                       "data_type": "video" if t.images == "multi" else "image", "level": "L1", "subpart": "Single-Image & Text Comprehension", "version": "v2"})
    png(base / "img/decoy.jpg")
    qs.append({"question_id": "decoy", "question": "?", "choice_a": "1", "choice_b": "2", "choice_c": "3", "choice_d": "4",
               "answer": "A", "question_type_id": 1, "data_id": "img/decoy.jpg", "data_type": "image"})
    _dump(base / tasks[0].source.rule["annotation"], {"questions": qs, "question_type": types})


# ----------------------------------------------------------------------------- IconQA
def write_iconqa(tasks: list[TaskSpec], root: Path, n: int) -> None:
    base = root / "iconqa_data"
    problems, splits = {}, defaultdict(list)
    decoys = [("choose_txt", "prek"), ("fill_in_blank", "grade2"), ("choose_img", "kindergarten")]
    entries = [(t.source.rule["ques_type"], g, t.id) for t in tasks for g in t.source.rule["grades"]] + [(q, g, "decoy") for q, g in decoys]
    for qtype, grade, tag in entries:
        for i in range(n if tag != "decoy" else 1):
            pid = f"{len(problems) + 1}"
            split = "train" if i % 3 else "val"
            problems[pid] = {"question": f"How many shapes? ({tag} {i})", "choices": ["1", "2", "3"] if qtype != "fill_in_blank" else None,
                             "answer": (i % 3) if qtype != "fill_in_blank" else str(i), "ques_type": qtype, "grade": grade, "label": "counting"}
            splits[f"{qtype}_{split}"].append(pid)
            png(base / "iconqa" / split / qtype / pid / "image.png", i)
    _dump(base / "problems.json", problems)
    _dump(base / "pid_splits.json", splits)


# ----------------------------------------------------------------------------- WorldCuisines
def write_wcvqa(tasks: list[TaskSpec], root: Path, n: int) -> None:
    base = root / root_name(tasks[0])
    rows = defaultdict(list)
    ptype = {"no-context": "no_context", "context": "context", "adversarial": "adversarial_context"}
    for t in tasks:
        r = t.source.rule
        for i in range(n):
            pt = ptype[r.get("context", "no-context")]
            png(base / "images" / f"{t.id}-{i}.jpg", i)
            rows[r["task"]].append({"qa_id": f"{t.id}-{i}", "lang": r["lang"], "prompt_type": pt, "image_url": f"https://example.org/x/{t.id}-{i}.jpg",
                                    "question": "What is the name of this dish? 1. Sushi 2. Pizza 3. Tacos 4. Ramen 5. Pho", "mcq_answer_index": i % 5,
                                    "answer": ["Sushi", "Pizza", "Tacos", "Ramen", "Pho"][i % 5]})
        rows[r["task"]].append({**rows[r["task"]][-1], "qa_id": f"{t.id}-fr", "lang": "fr"})  # other language: rejected
    for k, rs in rows.items():
        _jsonl(base / "hf_prompt" / f"train_task{k}" / f"en_train_task{k}.jsonl", rs)


# ----------------------------------------------------------------------------- DVQA / VSR
def write_dvqa(tasks: list[TaskSpec], root: Path, n: int) -> None:
    for t in tasks:
        base = root / root_name(t)
        rows = []
        for i in range(n):
            png(base / "images" / f"bar_train_{i:08d}.png", i)
            rows.append({"image": f"bar_train_{i:08d}.png", "question": f"What is the value of bar {i}?", "answer": str(i),
                         "question_id": 1000 + i, "template_id": "data"})
        _dump(base / "qa" / t.source.rule["annotation"], rows)


def write_vsr(tasks: list[TaskSpec], root: Path, n: int) -> None:
    for t in tasks:
        base = root / root_name(t)
        rows = []
        for i in range(n):
            png(base / "images" / f"{i:012d}.jpg", i)
            rows.append({"image": f"{i:012d}.jpg", "image_link": "http://images.cocodataset.org/x.jpg",
                         "caption": f"The cat is under the table {i}.", "label": i % 2, "relation": "under"})
        _jsonl(base / "train.jsonl", rows)


# ----------------------------------------------------------------------------- HFLB sources
def _kw_text(rule: dict, i: int) -> str:
    if "categories" in rule:
        cat = rule["category"]
        if cat == rule["rest"]:
            return f"a happy moment here {'abcdefghij'[i % 10]}"
        return f"a {rule['categories'][cat][0]} scene here {'abcdefghij'[i % 10]}"
    if "keywords" in rule:
        return f"what is the person {rule['keywords'][i % len(rule['keywords'])]} in front of"
    return f"what is depicted in this painting {i}"


def write_gqa(tasks: list[TaskSpec], root: Path, n: int) -> None:
    base = root / "GQA"
    qs = {}
    answers = ["red", "blue", "green", "table", "chair", "left"]
    for t in tasks:
        r = t.source.rule
        for i in range(n):
            qid = f"{len(qs) + 1:08d}"
            sem = r["semantic"][0]
            if "answers" in r:
                q, a, st = f"Is there a cup ({i})?", "yes" if i % 2 else "no", "verify"
            elif r.get("num_choices") == 2:
                q, a, st = "Is the cup red or blue?", ["red", "blue"][i % 2], "choose"
            else:
                q, a, st = f"What is on the table ({i})?", answers[i % len(answers)], "query"
            qs[qid] = {"imageId": f"n{qid}", "question": q, "answer": a, "fullAnswer": a, "isBalanced": True,
                       "types": {"structural": st, "semantic": sem, "detailed": f"{sem}X"}}
            png(base / "images" / f"n{qid}.jpg", i)
    _dump(base / "questions" / "train_balanced_questions.json", qs)


def write_vqa(tasks: list[TaskSpec], root: Path, n: int) -> None:
    base = root / "Abstract VQA"
    questions, anns = [], []
    for t in tasks:
        at = t.source.rule["answer_type"][0]
        for i in range(n):
            qid = len(questions) + 1
            img = qid * 10
            if at == "yes/no":
                q, a = "Is the girl happy?", "yes" if i % 2 else "no"
            elif at == "number":
                q, a = "How many trees are there?", str(i)
            elif "question_prefixes" in t.source.rule:
                q, a = "What color is the couch?", "red"
            else:
                q, a = "Who is sitting on the couch?", "girl"
            questions.append({"image_id": img, "question": q, "question_id": qid})
            anns.append({"question_id": qid, "image_id": img, "question_type": q.split()[0].lower(), "answer_type": at,
                         "multiple_choice_answer": a, "answers": [{"answer": a, "answer_confidence": "yes", "answer_id": 1}]})
            png(base / "images" / "train2015" / f"abstract_v002_train2015_{img:012d}.png", i)
    _dump(base / "Questions" / "OpenEnded_abstract_v002_train2015_questions.json", {"questions": questions, "task_type": "Open-Ended"})
    _dump(base / "Annotations" / "abstract_v002_train2015_annotations.json", {"annotations": anns})


def write_snli_ve(tasks: list[TaskSpec], root: Path, n: int) -> None:
    base = root / "SNLI-VE"
    rows = []
    for t in tasks:
        for i in range(n):
            fid = f"{len(rows) + 100}.jpg"
            png(base / "flickr30k_images" / fid, i)
            rows.append({"Flikr30kID": fid, "sentence1": "Two people outside.", "sentence2": _kw_text(t.source.rule, i),
                         "gold_label": ["entailment", "neutral", "contradiction"][i % 3], "pairID": f"{fid}#{i}r1e", "captionID": f"{fid}#{i}"})
    rows.append({**rows[0], "pairID": "bad", "gold_label": "-"})  # no gold label: rejected
    _jsonl(base / "snli_ve_train.jsonl", rows)


def write_coco_qa(tasks: list[TaskSpec], root: Path, n: int) -> None:
    base = root / "COCO-QA" / "train"
    q, a, ids, ty = [], [], [], []
    for t in tasks:
        for i in range(n):
            img = 1000 + len(q)
            q.append(f"what is on the plate {i}")
            a.append("pizza")
            ids.append(str(img))
            ty.append(str(t.source.rule["types"][0]))
            png(root / "COCO-QA" / "images" / f"COCO_train2014_{img:012d}.jpg", i)
    for name, lines in (("questions.txt", q), ("answers.txt", a), ("img_ids.txt", ids), ("types.txt", ty)):
        (base / name).parent.mkdir(parents=True, exist_ok=True)
        (base / name).write_text("\n".join(lines) + "\n")


def write_nlvr2(tasks: list[TaskSpec], root: Path, n: int) -> None:
    base = root / "NLVR2"
    rows = []
    for t in tasks:
        for i in range(n):
            stem = f"train-{len(rows) + 10}-{i}"
            for k in (0, 1):
                png(base / "images" / "train" / f"{stem}-img{k}.png", i + k)
            rows.append({"identifier": f"{stem}-0", "sentence": _kw_text(t.source.rule, i), "label": "True" if i % 2 else "False",
                         "left_url": "http://x/l.jpg", "right_url": "http://x/r.jpg"})
    _jsonl(base / "data" / "train.json", rows)


def write_vizwiz(tasks: list[TaskSpec], root: Path, n: int) -> None:
    base = root / "VizWiz"
    rows = []
    for t in tasks:
        for i in range(n):
            img = f"VizWiz_train_{len(rows):08d}.jpg"
            png(base / "train" / img, i)
            rows.append({"image": img, "question": _kw_text(t.source.rule, i), "answerable": 1, "answer_type": "other",
                         "answers": [{"answer": "soup", "answer_confidence": "yes"}] * 3 + [{"answer": "can", "answer_confidence": "maybe"}]})
    rows.append({**rows[0], "image": "VizWiz_train_99999999.jpg", "answerable": 0})
    _dump(base / "annotations" / "train.json", rows)


def write_aqua(tasks: list[TaskSpec], root: Path, n: int) -> None:
    base = root / "AQUA"
    rows = []
    for t in tasks:
        for i in range(n):
            img = f"{len(rows):05d}-art.jpg"
            png(base / "images" / img, i)
            rows.append({"image": img, "question": _kw_text(t.source.rule, i), "answer": "a tree", "need_external_knowledge": False})
    _dump(base / "train.json", rows)


WRITERS = {
    "llava_conversation": write_llava, "seed_bench2": write_seed, "iconqa": write_iconqa, "worldcuisines": write_wcvqa,
    "dvqa": write_dvqa, "vsr": write_vsr, "gqa": write_gqa, "vqa_v2": write_vqa, "snli_ve": write_snli_ve,
    "coco_qa": write_coco_qa, "nlvr2": write_nlvr2, "vizwiz": write_vizwiz, "aqua": write_aqua,
}


def write_fixtures(spec: BenchmarkSpec, root: Path, per_task: int = 5) -> Path:
    """Write fixtures for every task of a multi-modal spec; returns ``root``."""
    by_loader: dict[str, list[TaskSpec]] = defaultdict(list)
    for t in spec.tasks:
        by_loader[t.source.loader].append(t)
    for loader, tasks in by_loader.items():
        WRITERS[loader](tasks, Path(root), per_task)
    return Path(root)
