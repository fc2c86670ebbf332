"""Shipped tiny-zoo checkpoints: exported once, pinned by sha256, verified on load, recorded in results.

Every test works on its own weights folder ($DRAKE_BENCH_WEIGHTS) of randomly initialised tiny models
(drake_bench.models.testing), so nothing here pretrains and nothing depends on the package's own weights.
"""

from __future__ import annotations

import importlib.util
import io
import json
import shutil
from pathlib import Path

import pytest
import torch
from rich.console import Console
from safetensors.torch import load_file
from typer.testing import CliRunner

from drake_bench.benchmarks.store import file_sha256
from drake_bench.errors import CheckpointError, DrakeBenchError
from drake_bench.models import load_base, pretrain, shipped
from drake_bench.models.testing import toy_loader
from drake_bench.results.result_file import dump_result_data, load_result_data

REPO = Path(__file__).resolve().parents[1]
MM, TEXT = "tiny-llava-llama-s", "tiny-qwen2-s"
RECIPE = {"what": "random init, for tests"}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """A weights folder holding two exported toy models and their manifest (built once per module)."""
    root = tmp_path_factory.mktemp("shipped") / "weights"
    with torch.random.fork_rng(devices=[]):
        for name in (MM, TEXT):
            model, processor = toy_loader(name)
            shipped.export_checkpoint(model, processor, name, root=root)
    shipped.write_manifest(root, RECIPE)
    return root


@pytest.fixture
def weights(built, tmp_path, monkeypatch) -> Path:
    """A private copy of the built folder, active as the shipped source for this test."""
    root = tmp_path / "weights"
    shutil.copytree(built, root)
    monkeypatch.setenv(shipped.ENV_WEIGHTS, str(root))
    monkeypatch.setenv(shipped.ENV_SOURCE, "shipped")

    def no_pretraining(*args, **kwargs):
        raise AssertionError("the shipped source must never pretrain")

    monkeypatch.setattr(pretrain, "ensure_pretrained", no_pretraining)
    return root


def _flip_byte(path: Path, offset: int = -100) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


# ---------------------------------------------------------------------- export + manifest
def test_export_writes_a_bf16_checkpoint_and_a_stable_manifest(built, tmp_path):
    manifest = json.loads((built / shipped.MANIFEST).read_text())
    assert manifest["format"] == 1 and manifest["recipe"] == RECIPE and sorted(manifest["models"]) == [MM, TEXT]
    entry = manifest["models"][MM]
    assert {
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "processor_config.json",
        "tokenizer.json",
    } <= set(entry["files"])
    assert (
        entry["weights_sha256"] == entry["files"]["model.safetensors"] == file_sha256(built / MM / "model.safetensors")
    )
    assert entry["bytes"] == sum((built / MM / rel).stat().st_size for rel in entry["files"])
    assert entry["hub_repo"] == f"drake-bench/{MM}"
    assert {t.dtype for t in load_file(str(built / MM / "model.safetensors")).values()} == {torch.bfloat16}
    assert sorted(p.name for p in built.iterdir()) == sorted([shipped.MANIFEST, MM, TEXT])  # no temporary left over

    # exporting the same models again (fresh folder, then over the existing one) gives identical bytes
    again = tmp_path / "again"
    for _ in range(2):
        with torch.random.fork_rng(devices=[]):
            for name in (MM, TEXT):
                model, processor = toy_loader(name)
                before = {k: v.clone() for k, v in model.state_dict().items()}
                shipped.export_checkpoint(model, processor, name, root=again)
                assert model.dtype == torch.float32 and all(
                    torch.equal(before[k], v) for k, v in model.state_dict().items()
                )
        shipped.write_manifest(again, RECIPE)
        assert (again / shipped.MANIFEST).read_bytes() == (built / shipped.MANIFEST).read_bytes()


def test_a_folder_without_safetensors_is_not_a_checkpoint(tmp_path):
    (tmp_path / "stray").mkdir()
    (tmp_path / "stray" / "notes.txt").write_text("x")
    with pytest.raises(CheckpointError, match="no model.safetensors"):
        shipped.write_manifest(tmp_path, RECIPE)


# ---------------------------------------------------------------------- verification
def test_verify_passes_and_a_flipped_byte_names_the_file_and_both_hashes(weights):
    assert shipped.verify_shipped(MM) == weights / MM
    target = weights / MM / "model.safetensors"
    expected = shipped.read_manifest()["models"][MM]["files"]["model.safetensors"]
    _flip_byte(target)
    actual = file_sha256(target)
    with pytest.raises(CheckpointError) as info:
        shipped.verify_shipped(MM)
    msg = str(info.value)
    assert str(target) in msg and expected in msg and actual in msg and "python scripts/build_zoo.py" in msg
    with pytest.raises(CheckpointError, match="model.safetensors"):
        load_base(MM)  # loading verifies too
    assert shipped.verify_shipped(TEXT)  # the other model is untouched


def test_a_missing_or_unrecorded_file_fails_verification(weights):
    (weights / TEXT / "tokenizer.json").unlink()
    with pytest.raises(CheckpointError, match=r"tokenizer\.json: missing.*build_zoo"):
        shipped.verify_shipped(TEXT)
    (weights / MM / "model.safetensors.index.json").write_text("{}")
    with pytest.raises(CheckpointError, match=r"files not recorded.*model\.safetensors\.index\.json"):
        shipped.verify_shipped(MM)


def test_missing_weights_say_how_to_build_them(tmp_path, monkeypatch, weights):
    monkeypatch.setenv(shipped.ENV_WEIGHTS, str(tmp_path / "empty"))
    with pytest.raises(CheckpointError) as info:
        load_base(MM)
    msg = str(info.value)
    assert "shipped tiny-zoo weights are missing" in msg and "scripts/build_zoo.py" in msg
    assert "DRAKE_BENCH_ZOO=pretrain" in msg and str(tmp_path / "empty" / "manifest.json") in msg
    monkeypatch.setenv(shipped.ENV_WEIGHTS, str(weights))
    with pytest.raises(
        CheckpointError, match=r"lists no model 'tiny-llama-m' \(it lists tiny-llava-llama-s, tiny-qwen2-s\)"
    ):
        load_base("tiny-llama-m")
    shutil.rmtree(weights / TEXT)
    with pytest.raises(CheckpointError, match="its folder .* does not exist"):
        load_base(TEXT)


# ---------------------------------------------------------------------- loading
def test_load_base_loads_the_shipped_folder_in_float32(weights):
    for name in (MM, TEXT):
        exported = toy_loader(name)[0].state_dict()  # the same seeded random init the folder was exported from
        model, processor = load_base(name)
        assert model.dtype == torch.float32 and not model.training
        assert not any(p.requires_grad for p in model.parameters())
        state = model.state_dict()
        assert state.keys() == exported.keys()
        for key, value in exported.items():  # the bf16 bytes, upcast exactly
            assert state[key].dtype == torch.float32, key
            assert torch.equal(state[key], value.to(torch.bfloat16).float()), key
    assert type(processor).__name__ != "LlavaProcessor" and type(load_base(MM)[1]).__name__ == "LlavaProcessor"
    assert load_base(TEXT, dtype="auto")[0].dtype == torch.bfloat16  # the stored dtype, when asked for
    assert load_base(TEXT, dtype=torch.bfloat16)[0].dtype == torch.bfloat16


def test_the_pretrain_source_is_chosen_by_argument_or_environment(weights, monkeypatch):
    asked = []

    def fake_pretrained(name, seed=0, recipe=None):
        asked.append((name, seed))
        return weights / name  # any save_pretrained folder stands in for the pretraining cache

    monkeypatch.setattr(pretrain, "ensure_pretrained", fake_pretrained)
    load_base(TEXT, source="pretrain", seed=3)
    monkeypatch.setenv(shipped.ENV_SOURCE, "pretrain")
    load_base(TEXT)
    assert asked == [(TEXT, 3), (TEXT, 0)]
    load_base(TEXT, source="shipped")  # the argument wins over the environment
    assert len(asked) == 2
    with pytest.raises(DrakeBenchError, match="the shipped zoo holds seed 0 only"):
        load_base(TEXT, source="shipped", seed=1)
    monkeypatch.setenv(shipped.ENV_SOURCE, "download")
    with pytest.raises(DrakeBenchError, match=r"\$DRAKE_BENCH_ZOO='download'.*shipped, pretrain"):
        load_base(TEXT)


def test_a_hub_repo_id_loads_offline_from_the_hf_cache(weights, tmp_path, monkeypatch):
    import huggingface_hub
    import huggingface_hub.constants as hub_constants

    cache = tmp_path / "hub"
    commit = shipped.add_shipped_to_hf_cache(MM, cache_dir=cache)
    info = huggingface_hub.scan_cache_dir(cache)  # huggingface_hub accepts the layout
    (repo,) = info.repos
    assert (repo.repo_id, repo.repo_type) == (f"drake-bench/{MM}", "model") and not info.warnings
    assert {r.commit_hash for r in repo.revisions} == {commit}
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(cache))
    model, processor = load_base(f"drake-bench/{MM}")
    shipped_model, _ = load_base(MM)
    assert model.dtype == torch.float32 and type(processor).__name__ == "LlavaProcessor"
    assert all(torch.equal(model.state_dict()[k], v) for k, v in shipped_model.state_dict().items())
    assert not any(p.requires_grad for p in model.parameters())


# ---------------------------------------------------------------------- the Hub
def test_publish_dry_run_plans_every_file_with_its_hash(weights):
    plan = shipped.publish_models([MM, TEXT])
    manifest = shipped.read_manifest()["models"]
    assert [p["repo_id"] for p in plan] == [f"drake-bench/{MM}", f"drake-bench/{TEXT}"]
    for item in plan:
        entry = manifest[item["name"]]
        assert item["repo_type"] == "model" and item["weights_sha256"] == entry["weights_sha256"]
        assert {f["path"]: f["sha256"] for f in item["files"]} == entry["files"]
        assert all(f["bytes"] == (weights / item["name"] / f["path"]).stat().st_size for f in item["files"])
        assert item["bytes"] == entry["bytes"] and "commit" not in item
    assert [p["repo_id"] for p in shipped.publish_models(None, repo_prefix="me")] == [f"me/{MM}", f"me/{TEXT}"]
    _flip_byte(weights / TEXT / "config.json", offset=5)
    with pytest.raises(CheckpointError, match="config.json"):  # never publish bytes the manifest does not vouch for
        shipped.publish_models([TEXT])


def test_publish_creates_model_repos_and_uploads_the_recorded_files(weights):
    class Api:
        def __init__(self):
            self.calls = []

        def create_repo(self, repo_id, **kw):
            self.calls.append(("create_repo", repo_id, kw))

        def upload_folder(self, **kw):
            self.calls.append(("upload_folder", kw["repo_id"], kw))
            return type("Commit", (), {"oid": "c0ffee"})()

    api = Api()
    plan = shipped.publish_models([TEXT], dry_run=False, api=api)
    (create, upload) = api.calls
    assert create[:2] == ("create_repo", f"drake-bench/{TEXT}") and create[2]["repo_type"] == "model"
    assert upload[2]["repo_type"] == "model" and upload[2]["folder_path"] == str(weights / TEXT)
    assert sorted(upload[2]["allow_patterns"]) == sorted(shipped.read_manifest()["models"][TEXT]["files"])
    assert plan[0]["commit"] == "c0ffee"

    class Down(Api):
        def upload_folder(self, **kw):
            raise OSError("connection refused")

    from drake_bench.errors import HubError

    with pytest.raises(HubError, match=rf"drake-bench/{TEXT} failed \(nothing was uploaded\).*connection refused"):
        shipped.publish_models([TEXT], dry_run=False, api=Down())


# ---------------------------------------------------------------------- identity, runner
def test_model_identity_carries_the_weights_sha256(weights, monkeypatch):
    from drake_bench.methods.sft import SFT
    from drake_bench.models.identity import model_identity

    sha = shipped.read_manifest()["models"][MM]["weights_sha256"]
    ident = model_identity(MM)
    assert ident == {
        "source": "drake_bench shipped zoo",
        "name": MM,
        "weights_sha256": sha,
        "hub_repo": f"drake-bench/{MM}",
    }
    assert SFT().model_identity(MM).weights == ident  # what the evaluator writes into model_allocation.checkpoints
    monkeypatch.setenv(shipped.ENV_SOURCE, "pretrain")
    assert model_identity(MM)["recipe"] == pretrain.DEFAULT_RECIPE.as_dict() and "weights_sha256" not in model_identity(
        MM
    )


def test_the_runner_verifies_shipped_models_one_line_each_and_never_pretrains(weights):
    from drake_bench import runner

    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=200)
    runner.prepare_tiny_models(["none", MM, "llava-1.5-7b", TEXT], console)
    lines = out.getvalue().splitlines()
    sha = shipped.read_manifest()["models"][MM]["weights_sha256"]
    assert len(lines) == 2 and lines[0].startswith(f"verified {MM}: shipped weights sha256 {sha[:12]}")
    assert lines[1].startswith(f"verified {TEXT}")
    _flip_byte(weights / TEXT / "model.safetensors")
    with pytest.raises(CheckpointError, match=f"{TEXT}.*model.safetensors"):
        runner.prepare_tiny_models([TEXT], console)


# ---------------------------------------------------------------------- report / check
BOARD = REPO / "tests" / "results" / "main-job-recipe-6" / "drake-synth" / "dynamic"  # a copy of a fixed board
SFT_FILE, FEDIT_FILE = (BOARD / m / "1.0" / "result.json" for m in ("sft", "fedit"))


def _cli(*args) -> tuple[int, str]:
    from drake_bench.cli import app

    r = CliRunner().invoke(app, [str(a) for a in args])
    return r.exit_code, r.output + (r.stderr if r.stderr_bytes is not None else "")


def _with_weights(src: Path, dst: Path, shas: dict[str, str | None]) -> Path:
    """A copy of a committed result whose models carry shipped identities (sha None: keep the recipe-only one)."""
    data = load_result_data(src)
    for model, sha in shas.items():
        if sha is not None:
            data["model_allocation"]["checkpoints"][model] = {
                "source": "drake_bench shipped zoo",
                "name": model,
                "weights_sha256": sha,
                "hub_repo": f"drake-bench/{model}",
            }
    return dump_result_data(data, dst)


def test_report_refuses_one_model_name_on_different_weights(tmp_path):
    a, b = "a" * 64, "b" * 64
    same = {"tiny-llava-llama-s": a, "tiny-llava-llama-m": a}
    sft = _with_weights(SFT_FILE, tmp_path / "sft.json", same)
    fedit = _with_weights(FEDIT_FILE, tmp_path / "fedit.json", same)
    code, text = _cli("report", sft, fedit)
    assert code == 0, text
    assert "recipe only" not in text

    other = _with_weights(FEDIT_FILE, tmp_path / "fedit-other.json", {"tiny-llava-llama-s": b, "tiny-llava-llama-m": a})
    code, text = _cli("report", sft, other)
    flat = " ".join(text.split())
    assert code == 1 and "Traceback" not in text
    assert "'tiny-llava-llama-s'" in flat and a in flat and b in flat and "cannot share a board" in flat
    assert str(sft) in flat and str(other) in flat and "tiny-llava-llama-m" not in flat


def test_report_refuses_mixing_pinned_and_recipe_only_weights_and_says_which_are_unpinned(tmp_path):
    pinned = _with_weights(
        SFT_FILE, tmp_path / "sft.json", {"tiny-llava-llama-s": "a" * 64, "tiny-llava-llama-m": "c" * 64}
    )
    code, text = _cli("report", pinned, FEDIT_FILE)
    flat = " ".join(text.split())
    assert code == 1 and "records no sha256" in flat and "a" * 64 in flat
    assert str(pinned) in flat and str(FEDIT_FILE) in flat and "pretraining recipe (version" in flat

    code, text = _cli("report", SFT_FILE, FEDIT_FILE, "--out", tmp_path / "board")  # old boards: allowed, said so
    flat = " ".join(text.split())
    assert code == 0 and "tiny-llava-llama-s: weights identified by pretraining recipe only, no sha256" in flat
    assert "recipe only, no sha256" in (tmp_path / "board" / "summary.md").read_text()


def test_check_says_which_files_cannot_share_a_board_and_rejects_a_malformed_sha(tmp_path):
    a = _with_weights(SFT_FILE, tmp_path / "a.json", {"tiny-llava-llama-s": "a" * 64, "tiny-llava-llama-m": "a" * 64})
    b = _with_weights(FEDIT_FILE, tmp_path / "b.json", {"tiny-llava-llama-s": "b" * 64, "tiny-llava-llama-m": "a" * 64})
    code, text = _cli("check", a, b)
    assert code == 0 and "not one board" in text and "b" * 64 in " ".join(text.split())
    bad = _with_weights(SFT_FILE, tmp_path / "bad.json", {"tiny-llava-llama-s": "not-a-hash"})
    code, text = _cli("check", bad)
    assert code == 1 and "weights_sha256: 'not-a-hash' is not a sha256 hex digest" in " ".join(text.split())


# ---------------------------------------------------------------------- the build script and the package
def test_build_script_pretrains_exports_and_writes_the_manifest(tiny_cache, tmp_path, monkeypatch):
    monkeypatch.setenv(shipped.ENV_SOURCE, "shipped")  # the script asks for the pretrain source itself
    spec = importlib.util.spec_from_file_location("build_zoo", REPO / "scripts" / "build_zoo.py")
    build_zoo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build_zoo)
    root = tmp_path / "weights"
    manifest = build_zoo.build([TEXT], root)
    assert manifest["recipe"] == pretrain.DEFAULT_RECIPE.as_dict() and list(manifest["models"]) == [TEXT]
    assert shipped.verify_shipped(TEXT, root) == root / TEXT
    assert (tiny_cache[0] / TEXT).is_dir()  # pretrained through the development cache


PACKAGE_WEIGHTS = Path(shipped.__file__).resolve().parent / "weights"


def test_the_package_weights_verify_for_every_tiny_model():
    from drake_bench.models.zoo import tiny_names

    assert shipped.shipped_names(PACKAGE_WEIGHTS) == sorted(tiny_names())
    for name in tiny_names():
        shipped.verify_shipped(name, PACKAGE_WEIGHTS)
    manifest = shipped.read_manifest(PACKAGE_WEIGHTS)
    assert manifest["recipe"] == pretrain.DEFAULT_RECIPE.as_dict(), "the shipped weights are not the current recipe's"
    assert sum(m["bytes"] for m in manifest["models"].values()) < 50e6  # the package stays small


def test_the_wheel_ships_the_weights_folder():
    import tomllib

    data = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert data["tool"]["setuptools"]["package-data"]["drake_bench.models"] == ["weights/manifest.json", "weights/*/*"]


def test_rebuilding_reproduces_the_shipped_tokenizer_and_text_model(tmp_path, monkeypatch):
    """The build is deterministic: the tokenizer and the smallest text model, rebuilt from nothing with the
    default recipe, give the shipped bytes. Float results of a CPU build depend on the CPU model and the
    library versions, so the comparison needs the ones recorded in the manifest; elsewhere it is skipped."""
    manifest = shipped.read_manifest(PACKAGE_WEIGHTS)
    recorded, here = manifest.get("built_on", {}), shipped.build_environment()
    keys = ("cpu", "torch", "transformers", "tokenizers")
    if {k: recorded.get(k) for k in keys} != {k: here[k] for k in keys}:
        pytest.skip(f"built on {recorded}, this machine is {here}: identical bytes are not expected")
    monkeypatch.setenv("DRAKE_BENCH_MODELS", str(tmp_path / "models"))
    spec = importlib.util.spec_from_file_location("build_zoo", REPO / "scripts" / "build_zoo.py")
    build_zoo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build_zoo)
    rebuilt = build_zoo.build(["tiny-llama-s"], tmp_path / "weights")["models"]["tiny-llama-s"]
    shipped_entry = manifest["models"]["tiny-llama-s"]
    assert rebuilt["files"]["tokenizer.json"] == shipped_entry["files"]["tokenizer.json"]
    assert rebuilt["weights_sha256"] == shipped_entry["weights_sha256"]
    assert rebuilt["files"] == shipped_entry["files"]
