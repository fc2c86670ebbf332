"""Specs of the embedded benchmarks: drake-synth, hflb-synth, fedllm-synth (manifests are generated from these).

Structure mirrors the real benchmarks (``drake_bench.benchmarks.definitions``; docs/design-notes.md#toy-scale): DRAKE's 10 clients
x 4 ordered tasks with the same groups on the same client ids plus 7 unseen tasks,
HFLB's 9 clients x 4 question-type tasks, Fed-LLM-Large's 52 clients x 2 tasks.
"""

from __future__ import annotations

from drake_bench.benchmarks.sample import AnswerType
from drake_bench.benchmarks.spec import (
    AsyncDefaults,
    BenchmarkSpec,
    Choice,
    ClientSpec,
    DirichletDefaults,
    FLConfig,
    ModelAllocation,
    ScenarioDefaults,
    SourceSpec,
    StorageRule,
    SubsamplingRule,
    TaskSizes,
    TaskSpec,
)
from drake_bench.benchmarks.synth.loader import DOMAIN_VERSION
from drake_bench.benchmarks.synth.registry import get_generator

DEFAULT_POOL = 250
LARGE_POOL = 500
"""One task per image benchmark gets a double pool: at scale >= 22 it crosses the 11k threshold (10k/1k branch)."""
SEED = 0
VERSION = "1.5.0"
"""hflb-synth's version. 1.5.0: a validation split (``SYNTH_SUBSAMPLING``), the same test items. 1.4.0 stores the same content as 1.3.0 in a third of the bytes (``SYNTH_STORAGE``); 1.3.0
and 1.4.0 are archived in splits/archive/."""
FEDLLM_VERSION = "1.6.0"
"""fedllm-synth 1.6.0: a validation split (``SYNTH_SUBSAMPLING``), the same test items. 1.5.0: the same tasks and items as 1.4.0, plus a Dirichlet scenario over all 104 tasks with the
alphas FedRPCA's paper sweeps (choice ``fedllm-synth.dirichlet``), so the many-client label-skew regime that
aggregation methods are published on runs on the text benchmark too. 1.5.0, 1.4.0 and 1.3.0 are archived in
splits/archive/."""
FEDLLM_DIRICHLET_ALPHAS = [1.0, 0.3, 0.1]
DRAKE_VERSION = "1.9.0"
"""drake-synth 1.9.0: a validation split, 10% of each task's training draw (``SYNTH_SUBSAMPLING``): 180 training
items per task instead of 200, the same 50 test items (their shards are byte for byte 1.8.0's), and Self scored on all
50 of them instead of a seeded 20 (``fl.self_subsample``). 1.8.0: the reasoning group's state tasks ask about presence instead of comparing states across images,
and rsn-common-state replaces rsn-common-shape on client 9 (generator version 8). 1.7.0: each of the visual-relation
and multimodal-reasoning groups has a visual skill its clients share and no other group teaches (choice
``drake-synth.group-skills``; generator version 7), as image quality is VQA's: defect inspection (rel-defect-2 and
rel-statement-defect replace rel-same-count and rel-statement-color) and object states (rsn-state-coherence,
rsn-bongard-concept and rsn-odd-one-out redrawn about them). 1.6.0: the visual-relation and multimodal-reasoning
clients' tasks render in their group's own visual domain (``GROUP_DOMAIN``; generator version 6, new draws). 1.5.0:
``SYNTH_STORAGE``, and luma grain for the image-quality tasks' noise (generator version 5). 1.4.0: the reasoning
group's text speaks one figurative lexicon (generator version 4 of rsn-find-image, rsn-common-color,
rsn-common-shape). The older versions are archived in splits/archive/."""
SYNTH_STORAGE = StorageRule(images="webp-lossless", parquet_compression="zstd")
SYNTH_SUBSAMPLING = SubsamplingRule(validation_ratio=0.1)
"""The 8:2 rule of every version, and a tenth of each training draw held out for selecting hyperparameters (20 items of
a 250-item pool's 200): the tuning split the boards' "never select on test" needs, carved from training so the test
items stay those of the versions before it."""
LICENSE = "Apache-2.0"
METRIC = {
    AnswerType.MULTIPLE_CHOICE: "accuracy",
    AnswerType.YES_NO: "accuracy",
    AnswerType.OPEN: "token_accuracy",
    AnswerType.FREE_TEXT: "rouge_l",
}

# -- drake-synth ---------------------------------------------------------------------
# client -> (group, [(generator, split, real counterpart)] in Dynamic order); mirrors the FedMosaic paper's Table 37
# (drake_bench.benchmarks.definitions.drake.TABLE_37).
DRAKE_CLIENTS: dict[int, tuple[str, list[tuple[str, str, str]]]] = {
    1: (
        "visual-relation",
        [
            ("rel-count-across", "fashion-relation", "Fashion200K ClothCombination"),
            ("rel-relative-caption", "fashion-relation", "FashionIQ"),
            ("rel-defect-2", "dual-image-relation", "VISION 2_Img"),
            ("rel-edit-instruction", "dual-image-relation", "MagicBrush"),
        ],
    ),
    2: (
        "vqa",
        [
            ("vqa-quality-pair", "image-quality", "Co-Instruct 2_ImgCompare"),
            ("vqa-corners", "general-vqa", "SEED-Bench-2 KGQA"),
            ("icon-count-easy", "icon-domain", "IconQA ShortAnswerEasy"),
            ("dish-name", "dish-domain", "WCVQA DishName"),
        ],
    ),
    3: (
        "vqa",
        [
            ("vqa-distortion-type", "image-quality", "Co-Instruct HowWhat"),
            ("vqa-bar-chart", "general-vqa", "DVQA"),
            ("icon-count-hard", "icon-domain", "IconQA ShortAnswerHard"),
            ("dish-name-context", "dish-domain", "WCVQA ContextDishName"),
        ],
    ),
    4: (
        "vqa",
        [
            ("vqa-quality-triple", "image-quality", "Co-Instruct 3_ImgCompare"),
            ("vqa-instance-count", "general-vqa", "SEED-Bench-2 InstanceQA"),
            ("icon-shape-mc", "icon-domain", "IconQA MultiChoiceEasy"),
            ("dish-name-adversarial", "dish-domain", "WCVQA AdvContextDishName"),
        ],
    ),
    5: (
        "visual-relation",
        [
            ("rel-color-consistency", "fashion-relation", "Fashion200K ColorConsistency"),
            ("rel-statement-count", "dual-image-relation", "NLVR2 Subset1"),
            ("rel-defect-4", "dual-image-relation", "VISION 4_Img"),
            ("rel-spatial", "spatial-temporal", "VSR"),
        ],
    ),
    6: (
        "visual-relation",
        [
            ("rel-style-consistency", "fashion-relation", "Fashion200K StyleConsistency"),
            ("rel-statement-defect", "dual-image-relation", "NLVR2 Subset2"),
            ("rel-composed-retrieval", "dual-image-relation", "CIRR"),
            ("rel-motion", "spatial-temporal", "SEED-Bench-2 TemporalQA"),
        ],
    ),
    7: (
        "multimodal-reasoning",
        [
            ("rsn-metaphor-match", "figurative-understanding", "IRFL MetaphorSimileMatching"),
            ("rsn-bongard-relation", "context-dependent-reasoning", "Bongard-HOI ActionDetection"),
            ("rsn-find-image", "multi-image-text", "VizWiz (DEMON)"),
            ("rsn-state-coherence", "multi-image-text", "MIT-States StateCoherence"),
        ],
    ),
    8: (
        "multimodal-reasoning",
        [
            ("rsn-figurative-verify", "figurative-understanding", "IRFL FigurativeVerification"),
            ("rsn-idiom-match", "figurative-understanding", "IRFL IdiomMatching"),
            ("rsn-bongard-concept", "context-dependent-reasoning", "Bongard-OpenWorld ConceptDetection"),
            ("rsn-panel-sequence", "multi-image-text", "COMICS Dialogue"),
        ],
    ),
    9: (
        "multimodal-reasoning",
        [
            ("rsn-phrase-select", "figurative-understanding", "IRFL PhraseSelection"),
            ("rsn-common-color", "context-dependent-reasoning", "Bongard-OpenWorld ConceptQuery"),
            ("rsn-common-state", "context-dependent-reasoning", "Bongard-HOI ConceptQuery"),
            ("rsn-odd-one-out", "context-dependent-reasoning", "Bongard-HOI ActionIncoherence"),
        ],
    ),
    10: (
        "vqa",
        [
            ("vqa-quality-yesno", "image-quality", "Co-Instruct YesNo"),
            ("vqa-size-compare", "general-vqa", "TQA"),
            ("icon-clock", "icon-domain", "IconQA MultiChoiceHard"),
            ("dish-location", "dish-domain", "WCVQA Location"),
        ],
    ),
}
DRAKE_UNSEEN: list[tuple[str, str, str]] = [
    ("un-similarity", "novel-task-type", "DreamSim"),
    ("un-caption-retrieval", "novel-task-type", "Image-CoDe"),
    ("un-recipe-coherence", "novel-visual-domain", "RecipeQA ImageCoherence"),
    ("un-recipe-order", "novel-visual-domain", "RecipeQA VisualCloze"),
    ("un-edit-night", "novel-visual-domain", "HQ-Edit"),
    ("un-contrast-caption", "novel-task-type", "Mantis contrast-caption (seen images)"),
    ("un-contrast-caption-night", "novel-visual-domain", "Mantis contrast-caption (unseen images)"),
]
DRAKE_DIRICHLET = [  # analogues of drake's ten Dirichlet tasks (drake_bench.benchmarks.definitions.drake.DIRICHLET_TASKS)
    "rel-edit-instruction",
    "rel-spatial",
    "rel-statement-count",
    "rsn-metaphor-match",
    "rsn-idiom-match",
    "rsn-bongard-relation",
    "rsn-bongard-concept",
    "icon-shape-mc",
    "icon-count-easy",
    "vqa-quality-yesno",
]
LARGE_TASKS = {"vqa-instance-count", "hflb-c6-number"}
GROUP_DOMAIN: dict[str, str] = {"visual-relation": "studio", "multimodal-reasoning": "comic"}
"""drake-synth group -> the visual domain its client tasks render in (VQA keeps plain, paper and table scenes)."""
DOMAIN_WORDS = {
    "studio": "studio photographs (wall, floor, cast shadows)",
    "comic": "comic drawings (halftone paper, ink outlines, panel frame)",
}


def _task(
    dataset: str,
    gen_name: str,
    group: str,
    split: str,
    counterpart: str,
    task_id: str | None = None,
    pool: int | None = None,
    extra_rule: dict | None = None,
) -> TaskSpec:
    gen = get_generator(gen_name)
    tid = task_id or gen_name
    n = pool or (LARGE_POOL if tid in LARGE_TASKS else DEFAULT_POOL)
    n_train = int(round(n * 0.8))
    n_val = max(
        1, int(round(n_train * SYNTH_SUBSAMPLING.validation_ratio))
    )  # drake_bench.benchmarks.build.validation_size
    domain = (extra_rule or {}).get("visual_domain")
    version = max(gen.version, DOMAIN_VERSION) if domain else gen.version
    description = gen.description + (f" Rendered as {DOMAIN_WORDS[domain]}." if domain else "")
    return TaskSpec(
        id=tid,
        name=f"{gen_name} (mirrors {counterpart})",
        group=group,
        split=split,
        source=SourceSpec(
            dataset=dataset,
            variant=gen_name,
            loader="synth",
            rule={"pool_size": n, "generator_version": version, "seed": SEED, **(extra_rule or {})},
            license=LICENSE,
            redistributable=True,
            citation="drake_bench synthetic generator (procedural, Pillow-rendered)",
        ),
        images=gen.images,
        num_images=gen.num_images,
        answer_type=gen.answer_type,
        metric=METRIC[gen.answer_type],  # type: ignore[arg-type]
        sizes=TaskSizes(train=n_train - n_val, validation=n_val, test=n - n_train),
        description=description,
        provenance={"answer_type": "R", "images": "R", "sizes": "R"},
    )


def _image_fl() -> FLConfig:
    return FLConfig(
        rounds=8,
        local_steps=25,
        batch_size=4,
        eval_every_rounds=2,
        others_subsample=4,
        self_subsample=None,
        fast_adaptation_iters=50,
        fast_adaptation_eval_every=10,
    )


def _async() -> AsyncDefaults:
    return AsyncDefaults(patterns=[[2, 2, 2, 2], [1, 3, 1, 3], [3, 1, 3, 1]])


STORAGE_CHOICE = Choice(
    key="synth.storage",
    tag="R",
    decision="images stored as lossless WebP, every Parquet column zstd-compressed (storage block; drake-synth <= "
    "1.4.0 and hflb-/fedllm-synth 1.3.0 stored PNG with datasets' defaults)",
    reason="the issue asks for a few MB on disk: the same pixels in about 40% of the bytes (tests/test_synth_storage.py "
    "checks the decoded content against the older versions)",
)

SYNTH_CHOICES = [
    Choice(
        key="synth.sizes",
        tag="R",
        decision=f"pool {DEFAULT_POOL} items per task (180 train / 20 validation / 50 "
        "test: the 8:2 rule, a tenth of training held out); "
        f"{sorted(LARGE_TASKS)} have {LARGE_POOL}; scale with DRAKE_BENCH_SYNTH_SCALE or build_synth(scale=)",
        reason="whole suite builds in seconds on 2 CPU cores; scale >= 22 exercises the 10k/1k branch",
    ),
    Choice(
        key="synth.fl",
        tag="R",
        decision="8 rounds x 25 local steps, batch 4, eval every 2 rounds, Self on every "
        "test item of a client's own tasks (drake-synth <= 1.8.0 and hflb-synth <= 1.4.0: a seeded 20 per task), "
        "a seeded 4 per other client's task for Others (36 tasks x 4 = 144 items per client), fast adaptation 50 "
        "iterations evaluated every 10",
        reason="a toy scale on which every protocol path runs on CPU in minutes (docs/design-notes.md#toy-scale); "
        "Self on the whole test split has no item-sampling noise (a 20-item draw per seed accounted for "
        "most of the seed std of the earlier boards, 1.2 points at the client mean) for about 13% more "
        "main-job time; Others still rests on 144 items (pass others_subsample for full test sets)",
    ),
    Choice(
        key="synth.balance",
        tag="R",
        decision="labels and option positions are drawn before the image is built; "
        "yes/no is 50/50 and the correct option is uniform over positions",
        reason="a text-only model scores chance, so gains must come from looking at the image",
    ),
    Choice(
        key="synth.images",
        tag="R",
        decision="64x64 RGB Pillow renderings, bold colours, at most 5 images per item",
        reason="legible to a tiny CLIP tower at 48 px",
    ),
    STORAGE_CHOICE,
    Choice(
        key="synth.validation",
        tag="R",
        decision="10% of each task's training draw is its validation split (20 of "
        "200 items; the test split is unchanged); drake-synth <= 1.8.0, hflb-synth <= 1.4.0 and fedllm-synth <= "
        "1.5.0 have none",
        reason="hyperparameters must be selected on items that are neither trained on nor tested: a tenth keeps "
        "training at 180 items per task, about the one pass over a task the main job's schedule makes",
    ),
]


def drake_synth_spec() -> BenchmarkSpec:
    tasks: list[TaskSpec] = []
    clients: list[ClientSpec] = []
    for cid in sorted(DRAKE_CLIENTS):
        group, entries = DRAKE_CLIENTS[cid]
        domain = {"visual_domain": GROUP_DOMAIN[group]} if group in GROUP_DOMAIN else None
        for gen_name, split, counterpart in entries:
            tasks.append(_task("drake-synth", gen_name, group, split, counterpart, extra_rule=domain))
        clients.append(ClientSpec(id=cid, group=group, tasks=[e[0] for e in entries]))
    for gen_name, split, counterpart in DRAKE_UNSEEN:
        tasks.append(_task("drake-synth", gen_name, "unseen", split, counterpart))
    ids = list(DRAKE_CLIENTS)
    llama_m = {1, 7, 2}
    qwen_m = {5, 8, 3, 4}
    return BenchmarkSpec(
        name="drake-synth",
        version=DRAKE_VERSION,
        title="DRAKE-synth: procedurally generated mirror of DRAKE",
        description=(
            "Embedded multi-modal PFL benchmark with DRAKE's structure: 10 clients x 4 ordered tasks (visual relation "
            "on clients 1, 5, 6; multi-modal reasoning on 7, 8, 9; VQA on 2, 3, 4, 10) and 7 unseen tasks, over a "
            "Pillow-rendered world of coloured shapes, icons, dishes, charts and clocks. Runs on a laptop CPU."
        ),
        modality="multimodal",
        embedded=True,
        mirrors="drake",
        tasks=tasks,
        clients=clients,
        unseen_tasks=[u[0] for u in DRAKE_UNSEEN],
        fl=_image_fl(),
        scenarios=ScenarioDefaults(
            default="dynamic",
            asynchronous=_async(),
            dirichlet=DirichletDefaults(tasks=DRAKE_DIRICHLET, alphas=[1.0, 0.5, 0.1]),
        ),
        model_allocations={
            "hetero": ModelAllocation(
                description="clients 1-4 small, 5-10 medium LLaVA-Llama",
                source="FedMosaic paper Table 14, Tab. 2 DRAKE-Dynamic row (4 x 1B / 6 x 3B)",
                clients={str(c): "tiny-llava-llama-s" if c <= 4 else "tiny-llava-llama-m" for c in ids},
            ),
            "cross-family": ModelAllocation(
                description="3 LLaVA-Llama m, 4 LLaVA-Qwen2 m, 3 LLaVA-Qwen2 l; every group mixes families",
                source="FedMosaic paper Table 14, Tab. 4 row (0/3/0 Llama, 0/4/3 Qwen); client mapping [R]",
                clients={
                    str(c): "tiny-llava-llama-m"
                    if c in llama_m
                    else "tiny-llava-qwen2-m"
                    if c in qwen_m
                    else "tiny-llava-qwen2-l"
                    for c in ids
                },
            ),
            "homo-llama": ModelAllocation(
                description="all clients LLaVA-Llama m",
                source="FedMosaic paper Table 14, Tab. 17 DRAKE-Homo",
                clients={str(c): "tiny-llava-llama-m" for c in ids},
            ),
            "three-sizes": ModelAllocation(
                description="clients 1-3 s, 4-8 m, 9-10 l LLaVA-Llama",
                source="FedMosaic paper Table 14, Tab. 16 row (3/5/2); client mapping [R]",
                clients={
                    str(c): "tiny-llava-llama-s" if c <= 3 else "tiny-llava-llama-m" if c <= 8 else "tiny-llava-llama-l"
                    for c in ids
                },
            ),
        },
        default_allocation="hetero",
        storage=SYNTH_STORAGE,
        subsampling=SYNTH_SUBSAMPLING,
        choices=SYNTH_CHOICES
        + [
            Choice(
                key="drake-synth.tasks",
                tag="R",
                decision="each DRAKE task is mirrored by a synthetic task of the "
                "same image count, answer type and skill family (task names say which)",
                reason="keeps DRAKE's group structure: related skills inside a group, few across groups",
            ),
            Choice(
                key="drake-synth.reasoning-lexicon",
                tag="R",
                decision="the reasoning group's text speaks one "
                "figurative lexicon ('fire' = red, 'wheel' = circle): rsn-metaphor-match, rsn-find-image (client 7), "
                "rsn-figurative-verify, rsn-idiom-match (client 8), rsn-phrase-select and rsn-common-color "
                "(client 9) read or answer in it; other groups name colours and shapes literally",
                reason="DRAKE's reasoning clients share figurative understanding (IRFL on clients 7, 8, 9); in 1.3.0 "
                "client 9 shared nothing with 7 and 8 that other groups did not teach, and measured "
                "within-group transfer was below across-group (docs/transfer/probe-film-cmp-reasoning-2000x12)",
            ),
            Choice(
                key="drake-synth.group-domains",
                tag="R",
                decision="the visual-relation clients' tasks (1, 5, 6) "
                "render as studio photographs (wall and floor, cast shadows, shaded rims) and the multimodal-"
                "reasoning clients' tasks (7, 8, 9) as comic drawings (halftone paper, ink outlines, panel frame); "
                "VQA keeps the plain, paper (icons) and table (dishes) scenes; the public mix draws none of the "
                "two (source.rule.visual_domain, generator version 6)",
                reason="DRAKE's groups differ in visual domain (product and fashion photos; figurative art, "
                "Bongard drawings and comics; natural-image VQA). In 1.5.0 every group shared one plain "
                "world and only VQA, whose icon and dish domains are its own, gained more from its own group "
                "than from others (docs/transfer/probe-film-cmp-2000x12-1.5.0-fresh-head)",
            ),
            Choice(
                key="drake-synth.group-skills",
                tag="R",
                decision="each group has a visual skill that a task of every "
                "one of its clients needs and no other group's task draws: image quality for VQA (clients 2, 3, 4, "
                "10), cracks for visual relation (rel-defect-2, rel-defect-4, rel-statement-defect on clients 1, 5, "
                "6: VISION's 2- and 4-image defect inspection, and NLVR2-style statements about it), object states "
                "drawn as comic emanata for multimodal reasoning (rsn-state-coherence, rsn-bongard-concept, "
                "rsn-odd-one-out, rsn-common-state on clients 7, 8, 9, 9: MIT-States and Bongard) (generator "
                "version 7); the state tasks ask about presence (is every object in a named state, which image "
                "is not calm, does the query show the positives' marks), as the crack tasks do (generator version 8)",
                reason="the probe-transfer runs on 1.3.0 to 1.6.0 found that a learner carries task skill, not "
                "look, between clients: VQA, the one group whose skills (image quality, icons) no other group "
                "taught, was the one that gained more from its own clients; the relation and reasoning tasks "
                "asked about colour, shape, size and count, which every group teaches "
                "(docs/transfer/probe-film-cmp-1.6.0-fresh-head). On 1.7.0 the crack skill carried inside "
                "the relation group, but the reasoning sources did not learn their state tasks, which "
                "compared states across images (all the same? which differs?), and only client 9's "
                "colour and shape tasks were learnt, which every group teaches "
                "(docs/transfer/probe-film-cmp-2000x12-1.7.0-fresh-head)",
            ),
            Choice(
                key="drake-synth.answer_types",
                tag="I",
                decision="20 multiple-choice, 12 yes/no, 8 open client tasks, "
                "following the per-task answer types inferred for drake (its choice tasks.answer_types)",
            ),
            Choice(
                key="drake-synth.cross-family",
                tag="R",
                decision="llama-m on clients 1, 2, 7; qwen2-m on 3, 4, 5, 8; qwen2-l on 6, 9, 10",
                reason="each group holds both families, so cross-family sharing is exercised",
            ),
            Choice(key="drake-synth.three-sizes", tag="R", decision="s on clients 1-3, m on 4-8, l on 9-10"),
            Choice(
                key="drake-synth.dirichlet",
                tag="R",
                decision="drake's ten Dirichlet tasks (its scenarios.dirichlet.tasks) mapped to "
                "their analogues: " + ", ".join(DRAKE_DIRICHLET),
            ),
        ],
        citation="drake_bench drake-synth (procedural mirror of DRAKE, FedMosaic, ICLR 2026 submission)",
    )


# -- hflb-synth -----------------------------------------------------------------------
HFLB_CLIENTS: dict[int, tuple[str, list[str]]] = {
    1: ("GQA yes/no", ["attribute", "relation", "object", "global"]),
    2: ("GQA four-choice", ["attribute", "relation", "category", "global"]),
    3: ("GQA two-choice", ["attribute", "relation", "category", "global"]),
    4: ("Abstract VQA", ["attribute", "number", "yesno", "others"]),
    5: ("SNLI-VE", ["action", "scene", "object", "commonsense"]),
    6: ("COCO-QA", ["object", "number", "color", "location"]),
    7: ("NLVR2", ["negation", "spatial", "cardinality", "coordination"]),
    8: ("VizWiz", ["food", "color", "ocr", "object"]),
    9: ("AQUA", ["standing", "sit", "hold", "other"]),
}


def hflb_synth_spec() -> BenchmarkSpec:
    tasks: list[TaskSpec] = []
    clients: list[ClientSpec] = []
    for cid, (dataset, kinds) in HFLB_CLIENTS.items():
        ids = [f"hflb-c{cid}-{k}" for k in kinds]
        for tid, k in zip(ids, kinds):
            tasks.append(
                _task(
                    "hflb-synth",
                    tid,
                    "vqa",
                    dataset.lower().replace(" ", "-").replace("/", "-"),
                    f"HFLB {dataset}, {k} questions",
                )
            )
        clients.append(ClientSpec(id=cid, group="vqa", tasks=ids))
    cids = list(HFLB_CLIENTS)
    return BenchmarkSpec(
        name="hflb-synth",
        version=VERSION,
        title="HFLB-synth: procedurally generated mirror of HFLB",
        description=(
            "Embedded single-image VQA PFL benchmark with HFLB's structure: 9 clients (GQA yes/no, 4-choice, "
            "2-choice, Abstract VQA, SNLI-VE, COCO-QA, NLVR2, VizWiz, AQUA analogues), each split into 4 "
            "question-type tasks, over the same synthetic visual world as drake-synth."
        ),
        modality="multimodal",
        embedded=True,
        mirrors="hflb",
        tasks=tasks,
        clients=clients,
        fl=_image_fl(),
        scenarios=ScenarioDefaults(default="dynamic", asynchronous=_async()),
        model_allocations={
            "hetero": ModelAllocation(
                description="clients 1-3 small, 4-9 medium LLaVA-Llama",
                source="FedMosaic paper Table 14, Tab. 2 HFLB-Dynamic row (3 x 1B / 6 x 3B)",
                clients={str(c): "tiny-llava-llama-s" if c <= 3 else "tiny-llava-llama-m" for c in cids},
            ),
            "homo-llama": ModelAllocation(
                description="all clients LLaVA-Llama m",
                source="FedMosaic paper Table 14, Tab. 17 HFLB-Homo",
                clients={str(c): "tiny-llava-llama-m" for c in cids},
            ),
        },
        default_allocation="hetero",
        storage=SYNTH_STORAGE,
        subsampling=SYNTH_SUBSAMPLING,
        choices=SYNTH_CHOICES
        + [
            Choice(
                key="hflb-synth.tasks",
                tag="R",
                decision="each HFLB client is mirrored by an answer format and visual "
                "domain, each of its 4 tasks by a question type (FedMosaic paper Table 13 names)",
            ),
        ],
        citation="drake_bench hflb-synth (procedural mirror of HFLB / FedDAT)",
    )


# -- fedllm-synth ---------------------------------------------------------------------
FEDLLM_POOL = 60


def fedllm_clients() -> dict[int, tuple[str, list[str]]]:
    """52 clients: 18 flan, 24 aya (4 per synthetic language), 10 chatbot; 2 distinct task types each [R]."""
    from drake_bench.benchmarks.synth.text import CHAT, FLAN

    out: dict[int, tuple[str, list[str]]] = {}
    cid = 1
    for i in range(18):
        out[cid] = ("flan", [FLAN[i % 6], FLAN[(i + 1 + i // 6) % 6]])
        cid += 1
    from drake_bench.benchmarks.synth.world import LANGUAGES

    for lang in LANGUAGES:
        for j in range(4):
            pair = [f"aya-{lang}-facts", f"aya-{lang}-count"]
            out[cid] = (f"aya-{lang}", pair if j % 2 == 0 else pair[::-1])
            cid += 1
    for i in range(10):
        out[cid] = (
            "chatbot",
            [CHAT[i % 3], CHAT[(i + 1 + i // 3) % 3] if (i + 1 + i // 3) % 3 != i % 3 else CHAT[(i + 2) % 3]],
        )
        cid += 1
    return out


def fedllm_synth_spec() -> BenchmarkSpec:
    tasks: list[TaskSpec] = []
    clients: list[ClientSpec] = []
    for cid, (group, gens) in fedllm_clients().items():
        ids = [f"c{cid:02d}-{g}" for g in gens]
        for tid, g in zip(ids, gens):
            source = "Fed-FLAN" if group == "flan" else "Fed-ChatbotIT" if group == "chatbot" else "Fed-Aya"
            tasks.append(
                _task("fedllm-synth", g, group, group, f"Fed-LLM-Large {source}", task_id=tid, pool=FEDLLM_POOL)
            )
        clients.append(ClientSpec(id=cid, group=group, tasks=ids))
    cids = [c.id for c in clients]
    return BenchmarkSpec(
        name="fedllm-synth",
        version=FEDLLM_VERSION,
        title="FedLLM-synth: procedurally generated mirror of Fed-LLM-Large",
        description=(
            "Embedded text-only PFL benchmark with Fed-LLM-Large's structure: 52 clients x 2 instruction-"
            "following tasks from three sources (flan-style English task types, six synthetic languages with "
            "their own vocabularies, chatbot requests), scored by Rouge-L."
        ),
        modality="text",
        embedded=True,
        mirrors="fed-llm-large",
        tasks=tasks,
        clients=clients,
        fl=FLConfig(
            rounds=4,
            local_steps=10,
            batch_size=4,
            eval_every_rounds=1,
            others_subsample=2,
            self_subsample=None,
            fast_adaptation_iters=50,
            fast_adaptation_eval_every=10,
        ),
        scenarios=ScenarioDefaults(
            default="dynamic", dirichlet=DirichletDefaults(tasks=[t.id for t in tasks], alphas=FEDLLM_DIRICHLET_ALPHAS)
        ),
        model_allocations={
            "hetero": ModelAllocation(
                description="26 small and 26 medium Llama; odd client ids small, even medium",
                source="FedMosaic paper Table 14, Tab. 6 row (26 x 1B / 26 x 3B); client mapping [R]",
                clients={str(c): "tiny-llama-s" if c % 2 else "tiny-llama-m" for c in cids},
            ),
        },
        default_allocation="hetero",
        storage=SYNTH_STORAGE,
        subsampling=SYNTH_SUBSAMPLING,
        choices=SYNTH_CHOICES[:3]
        + [STORAGE_CHOICE]
        + [
            Choice(
                key="fedllm-synth.clients",
                tag="R",
                decision="clients 1-18 flan, 19-42 aya (4 per language, "
                "zorvian, kelanese, mirathi, tuvalic, oshkan, brellic), 43-52 chatbot; 2 distinct task types each",
                reason="the FedMosaic paper does not give Fed-LLM-Large's client construction; clients drawn per "
                "source and language, mapping published in the manifest",
            ),
            Choice(
                key="fedllm-synth.sizes",
                tag="R",
                decision=f"pool {FEDLLM_POOL} per task (48 train / 12 test); "
                "scale 5 approaches the FedMosaic paper's 31K questions (Table 12)",
            ),
            Choice(
                key="fedllm-synth.allocation",
                tag="R",
                decision="odd client ids tiny-llama-s, even tiny-llama-m",
                reason="every source holds both model sizes",
            ),
            Choice(
                key="fedllm-synth.dirichlet",
                tag="R",
                decision="all 104 client tasks merged and split over the 52 "
                f"clients with Dir(alpha) shares per task, alpha in {FEDLLM_DIRICHLET_ALPHAS}",
                reason="FedRPCA's paper (Tables 1-3) splits labels over 50 clients with Dir(0.3) and sweeps alpha "
                "0.1-10; here a task plays a label's part. Every task is merged (not one per task type) "
                "so that each client's test share of a task, cut with the same proportions, is not empty "
                "for most clients: 12 test items per task over 52 clients leave few enough as it is",
            ),
            Choice(
                key="fedllm-synth.eval",
                tag="R",
                decision="evaluate every round, as fed-llm-large does "
                "(4 rounds at a 5-round interval would give one point)",
            ),
        ],
        citation="drake_bench fedllm-synth (procedural mirror of Fed-LLM-Large)",
    )


SPEC_BUILDERS = {"drake-synth": drake_synth_spec, "hflb-synth": hflb_synth_spec, "fedllm-synth": fedllm_synth_spec}
