"""The LoRA example plugin (drake_bench/plugins/examples/lora.py, ``lora-example``) end to end on drake-synth.

One small run on the shipped tiny models (the weights a user's run loads; conftest points the zoo at local
pretraining, so the test points it back): the result file validates, the uploads are the adapter tensors and
nothing else, training moves the adapters, the server sends each client its architecture's average, and the
result records the shipped checkpoints' sha256 as each model's weights. The docs page includes the file.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from drake_bench import Message, RunConfig, State, create_method, run
from drake_bench.cli import app
from drake_bench.evaluator.checkpoint import load as load_checkpoint
from drake_bench.models import shipped
from drake_bench.plugins.examples.lora import LoRAExample
from drake_bench.plugins.protocol import Method, protocol_problems
from drake_bench.results.result_file import check_result

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def shipped_zoo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(shipped.ENV_SOURCE, "shipped")
    monkeypatch.delenv(shipped.ENV_WEIGHTS, raising=False)


def test_the_lora_example_is_installed_and_satisfies_the_protocol():
    method = create_method("lora-example", {"own_weight": 0.0})
    assert isinstance(method, LoRAExample) and isinstance(method, Method) and protocol_problems(method) == []
    assert method.meta.name == "lora-example" and method.config.own_weight == 0.0
    assert all((f.description or "").strip() for f in LoRAExample.Config.model_fields.values())


def test_its_model_identity_is_the_shipped_checkpoints_sha256(shipped_zoo):
    manifest = shipped.read_manifest()["models"]
    for name in ("tiny-llava-llama-s", "tiny-llava-llama-m"):
        ident = LoRAExample().model_identity(name)
        sha = hashlib.sha256((shipped.weights_root() / name / shipped.WEIGHTS_FILE).read_bytes()).hexdigest()
        assert ident.weights["weights_sha256"] == manifest[name]["weights_sha256"] == sha
        assert ident.weights == shipped.shipped_identity(name) and ident.architecture == name.removeprefix("tiny-")


def test_the_lora_example_runs_end_to_end_and_shares_its_adapters(small_synth, shipped_zoo, tmp_path):
    out = tmp_path / "runs"
    result = run(
        RunConfig(
            benchmark="drake-synth",
            method="lora-example",
            seeds=[0],
            rounds=4,
            local_steps=1,
            eval_every_rounds=4,
            others_subsample=1,
            self_subsample=1,
            fast_adaptation=False,
            out=str(out),
        )
    )
    assert result.status == "complete" and check_result(result) == []
    path = result.path(str(out))
    cli = CliRunner().invoke(app, ["check", str(path)])  # what `drake-bench check` says of the file
    assert cli.exit_code == 0, cli.output

    # the result records the shipped weights, and the engine's own inference settings
    manifest = shipped.read_manifest()["models"]
    checkpoints = result.model_allocation.checkpoints
    assert set(checkpoints) == {"tiny-llava-llama-s", "tiny-llava-llama-m"}
    assert all(checkpoints[m]["weights_sha256"] == manifest[m]["weights_sha256"] for m in checkpoints)
    assert result.evaluation.prompt_template_version == LoRAExample().evaluation_settings()["prompt_template_version"]

    # the final states (the last round's uploads) and messages, from the run's last checkpoint
    (run_dir,) = out.glob("checkpoints/**/seed-0")
    progress = load_checkpoint(run_dir)
    assert progress.completed_rounds == 4
    states, messages = progress.clients, progress.messages
    arch = {c: result.model_allocation.clients[str(c)] for c in states}

    # uploads are the adapter tensors only: their bytes are the adapter's (plus 2 for the empty metadata `{}`)
    for cost in result.raw.costs:
        adapter = states[cost.client].tensors
        assert adapter and all(".lora_A." in k or ".lora_B." in k for k in adapter)
        size = sum(t.numel() * t.element_size() for t in adapter.values())
        assert cost.uplink_bytes == Message(tensors=adapter).num_bytes() == size + 2 > 2
        assert cost.uplink_elements == {"float32": sum(t.numel() for t in adapter.values())}
        assert cost.downlink_bytes == cost.uplink_bytes  # the average of adapters of the same shapes

    # training moved the adapters: LoRA's B starts at zero (the model is the base), and no longer is
    fresh = LoRAExample()
    for c, state in states.items():
        assert any(t.abs().max() > 0 for k, t in state.tensors.items() if ".lora_B." in k), c
    # the server sends each client the average of its architecture's uploads, and differs across architectures
    for c, message in messages.items():
        same = [states[o].tensors for o in states if arch[o] == arch[c]]
        mean = fresh.adaptation_state(arch[c], {i: State(tensors=s) for i, s in enumerate(same)}, None)
        assert message.tensors.keys() == mean.tensors.keys()
        assert all(torch.allclose(message.tensors[k], mean.tensors[k]) for k in mean.tensors)
    small, medium = (min(c for c in states if arch[c] == m) for m in ("tiny-llava-llama-s", "tiny-llava-llama-m"))
    assert next(iter(messages[small].tensors.values())).shape != next(iter(messages[medium].tensors.values())).shape
    # personalised: clients of one architecture hold different adapters
    assert any(not torch.equal(states[1].tensors[k], states[2].tensors[k]) for k in states[1].tensors)


def test_the_docs_page_includes_the_example_file():
    text = (ROOT / "docs" / "writing-a-method.md").read_text()
    assert (
        '--8<-- "drake_bench/plugins/examples/lora.py"' in text
    )  # tests/test_docs.py runs the page with the file inlined
    assert "## A LoRA method" in text and "lora-example" in text
    models_page = (ROOT / "docs" / "models.md").read_text()
    assert "writing-a-method.md#a-lora-method" in models_page
