"""The tiny zoo's shipped checkpoints: built once, pinned by sha256, installed with the package.

Why: a tiny model pretrained on first use comes out slightly different on every machine (thread
counts, CPU kernels and library versions move the float sums), so two machines running the same
code and the same job wrote boards whose digits differed. The zoo is therefore pretrained once,
by ``python scripts/build_zoo.py``, and the finished checkpoints ship inside the package: every
machine loads the same bytes, and a fresh install never pretrains.

Layout of :func:`weights_root` (``drake_bench/models/weights/``, or ``$DRAKE_BENCH_WEIGHTS``)::

    manifest.json      {"format": 1, "recipe": {...the build's pretraining recipe...},
                        "models": {"<zoo name>": {"files": {"<relpath>": "<sha256>"},
                                                  "weights_sha256": "<sha256 of model.safetensors>",
                                                  "bytes": N, "hub_repo": "drake-bench/<zoo name>"}}}
    <zoo name>/        a ``save_pretrained`` folder: config.json, generation_config.json,
                       model.safetensors (bfloat16, to keep the package small) and the
                       tokenizer or processor files

Every load checks each file of the model against the manifest (:func:`verify_shipped`), so a
modified or truncated checkpoint fails loudly instead of moving scores; the result file records
``weights_sha256`` (:func:`shipped_identity`), and ``drake-bench report`` refuses to put results
of different weights for one model name on one board. :func:`~drake_bench.models.load_base`
upcasts the bfloat16 storage to float32 on CPU.

Each model folder is also published as a Hub model repo (:func:`publish_models`), so
``load_base("drake-bench/<zoo name>")`` loads it with ``from_pretrained`` like any checkpoint,
offline from the Hugging Face cache too (:func:`add_shipped_to_hf_cache` places it there on a
machine without network).

Two sources for tiny names (:func:`zoo_source`): ``"shipped"`` (the default) and ``"pretrain"``
(``DRAKE_BENCH_ZOO=pretrain`` or ``load_base(..., source="pretrain")``), which pretrains locally
and caches under ``models_home()``: for developing the recipe, for the tests, and for the build
script that produces the shipped weights.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from drake_bench.benchmarks.store import file_sha256
from drake_bench.core.json_files import json_bytes, read_json  # stable bytes: a rebuild gives identical bytes
from drake_bench.errors import CheckpointError, DrakeBenchError, HubError, JSONFileError

FORMAT = 1
MANIFEST = "manifest.json"
WEIGHTS_FILE = "model.safetensors"
HUB_PREFIX = "drake-bench"
REPO_TYPE = "model"
IDENTITY_SOURCE = "drake_bench shipped zoo"
REBUILD = "python scripts/build_zoo.py"
ENV_WEIGHTS = "DRAKE_BENCH_WEIGHTS"
ENV_SOURCE = "DRAKE_BENCH_ZOO"
SOURCES = ("shipped", "pretrain")
MANIFEST_MAX_BYTES = 1 << 20
"""The most bytes of a shipped-weights manifest (1 MiB): the shipped one lists 12 models in 11 KB, so a hundred-fold
zoo still fits. ``$DRAKE_BENCH_WEIGHTS`` may point at any folder, so a larger file is refused unread."""


def weights_root() -> Path:
    """Folder of the shipped checkpoints: ``$DRAKE_BENCH_WEIGHTS``, else ``drake_bench/models/weights``."""
    env = os.environ.get(ENV_WEIGHTS)
    if env:
        return Path(env).expanduser()
    return Path(__file__).resolve().parent / "weights"


def zoo_source(source: str | None = None) -> str:
    """Where tiny names load from: ``source`` if given, else ``$DRAKE_BENCH_ZOO``, else ``"shipped"``."""
    chosen = source if source is not None else (os.environ.get(ENV_SOURCE) or "shipped")
    if chosen not in SOURCES:
        where = "source=" if source is not None else f"${ENV_SOURCE}="
        raise DrakeBenchError(
            f"{where}{chosen!r}: the tiny zoo's source is one of {', '.join(SOURCES)} "
            "(shipped: the pinned checkpoints installed with drake_bench; pretrain: pretrain locally)"
        )
    return chosen


def _root(root: str | Path | None) -> Path:
    return Path(root).expanduser() if root is not None else weights_root()


def _files(folder: Path) -> list[str]:
    """Relative paths (posix) of the files under ``folder``, hidden ones (``.name``) left out, sorted."""
    out = []
    for p in folder.rglob("*"):
        rel = p.relative_to(folder)
        if p.is_file() and not any(part.startswith(".") for part in rel.parts):
            out.append(rel.as_posix())
    return sorted(out)


def _hash_folder(folder: Path) -> dict[str, str]:
    return {rel: file_sha256(folder / rel) for rel in _files(folder)}


def _check_name(name: str) -> None:
    if not name or name.startswith(".") or "/" in name or "\\" in name or name == MANIFEST:
        raise DrakeBenchError(
            f"{name!r} is not a shipped model name (a plain folder name such as 'tiny-llava-llama-s')"
        )


def _missing(what: str) -> CheckpointError:
    return CheckpointError(
        f"the shipped tiny-zoo weights are missing: {what}. An installed drake_bench carries them in "
        f"drake_bench/models/weights/; in a source checkout build them once with `{REBUILD}` (pretrains every tiny "
        f"model, minutes on CPU), or point {ENV_WEIGHTS} at a folder that holds them. For development, "
        f"{ENV_SOURCE}=pretrain pretrains the tiny models locally instead (their weights then differ across machines)."
    )


# ---------------------------------------------------------------------- building
def export_checkpoint(
    model: Any, processor: Any, name: str, root: str | Path | None = None, dtype: Any = "bfloat16"
) -> dict[str, str]:
    """Save ``model`` (in ``dtype``, safetensors) and ``processor`` as the shipped checkpoint ``root/name``.

    The folder is written next to its final place and swapped in with ``os.replace``, so a reader
    never sees half a checkpoint. The caller's model is left as it was (a copy is cast). Returns
    ``{relative path: sha256}`` of the written files; :func:`write_manifest` records them.
    """
    import torch

    _check_name(name)
    root = _root(root)
    root.mkdir(parents=True, exist_ok=True)
    cast = getattr(torch, dtype) if isinstance(dtype, str) else dtype
    tmp = root / f".{name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        copy.deepcopy(model).to(cast).save_pretrained(tmp, safe_serialization=True)
        processor.save_pretrained(tmp)
        _drop_loader_state(tmp)
        if not (tmp / WEIGHTS_FILE).is_file():
            raise CheckpointError(
                f"{name}: save_pretrained wrote no single {WEIGHTS_FILE} in {tmp} "
                f"(files: {_files(tmp)}); the shipped zoo holds one unsharded safetensors file per model"
            )
        hashes = _hash_folder(tmp)
        final = root / name
        old = root / f".{name}.old-{os.getpid()}"
        if final.exists():
            os.replace(final, old)
        os.replace(tmp, final)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return hashes


def build_environment() -> dict[str, Any]:
    """What float results of a single-threaded CPU build depend on besides the recipe: the CPU model and
    the library versions. Recorded in the manifest, so a rebuild elsewhere knows whether identical bytes
    can be expected (same CPU model and versions) or not."""
    import platform

    import tokenizers
    import torch
    import transformers

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
        "python": platform.python_version(),
    }


LOADER_STATE_KEYS = ("is_local", "local_files_only")
"""Keys transformers writes into a saved tokenizer config that say how the tokenizer was *loaded* (from a local
folder, with HF_HUB_OFFLINE set or not), not what it is. Dropped on export, so the shipped bytes depend on the
tokenizer alone and a rebuild in another environment gives the same hashes."""


def _drop_loader_state(folder: Path) -> None:
    for path in sorted(folder.glob("*config.json")):
        data = json.loads(path.read_text())
        if isinstance(data, dict) and any(k in data for k in LOADER_STATE_KEYS):
            for key in LOADER_STATE_KEYS:
                data.pop(key, None)
            path.write_bytes(json_bytes(data))


def write_manifest(
    root: str | Path | None, recipe: Mapping[str, Any], built_on: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Hash every model folder under ``root`` and write ``root/manifest.json``; returns the manifest.

    ``recipe`` is what the checkpoints were built from (free form; the build script gives the
    pretraining recipe), ``built_on`` where (:func:`build_environment`). Keys are sorted and the layout
    fixed, so rebuilding identical checkpoints gives an identical file.
    """
    root = _root(root)
    models: dict[str, Any] = {}
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        files = _hash_folder(folder)
        if WEIGHTS_FILE not in files:
            raise CheckpointError(
                f"{folder}: no {WEIGHTS_FILE}, so not a checkpoint folder; remove it or export the "
                f"model into it (drake_bench.models.shipped.export_checkpoint, `{REBUILD}`)"
            )
        models[folder.name] = {
            "files": files,
            "weights_sha256": files[WEIGHTS_FILE],
            "bytes": sum((folder / rel).stat().st_size for rel in files),
            "hub_repo": f"{HUB_PREFIX}/{folder.name}",
        }
    manifest = {"format": FORMAT, "recipe": dict(recipe), "models": models}
    if built_on is not None:
        manifest["built_on"] = dict(built_on)
    tmp = root / f".{MANIFEST}.tmp-{os.getpid()}"
    tmp.write_bytes(json_bytes(manifest))
    os.replace(tmp, root / MANIFEST)
    return manifest


# ---------------------------------------------------------------------- reading and verifying
def read_manifest(root: str | Path | None = None) -> dict[str, Any]:
    """The shipped manifest; :class:`~drake_bench.errors.CheckpointError` if it is missing or malformed."""
    path = _root(root) / MANIFEST
    if not path.is_file():
        raise _missing(f"{path} does not exist")
    try:  # installed with the package, or any folder $DRAKE_BENCH_WEIGHTS names: refused in one line if bad
        manifest = read_json(path, what="shipped-weights manifest", max_bytes=MANIFEST_MAX_BYTES)
    except JSONFileError as exc:
        raise CheckpointError(f"{exc}; reinstall drake_bench or rebuild with `{REBUILD}`") from None
    if (
        not isinstance(manifest, dict)
        or manifest.get("format") != FORMAT
        or not isinstance(manifest.get("models"), dict)
    ):
        got = manifest.get("format") if isinstance(manifest, dict) else type(manifest).__name__
        raise CheckpointError(
            f"{path}: not a format-{FORMAT} shipped-weights manifest (format {got!r}); "
            f"reinstall drake_bench or rebuild with `{REBUILD}`"
        )
    return manifest


def shipped_names(root: str | Path | None = None) -> list[str]:
    """Names of the models the manifest lists (an error if there is no manifest)."""
    return sorted(read_manifest(root)["models"])


def is_shipped(root: str | Path | None = None) -> bool:
    """Whether a shipped-weights manifest exists (it says nothing about the files: see :func:`verify_shipped`)."""
    return (_root(root) / MANIFEST).is_file()


def _entry(name: str, root: Path) -> dict[str, Any]:
    models = read_manifest(root)["models"]
    if name not in models:
        raise _missing(f"{root / MANIFEST} lists no model {name!r} (it lists {', '.join(sorted(models)) or 'none'})")
    entry = models[name]
    problem = _entry_problem(entry)
    if problem:
        raise CheckpointError(
            f"{root / MANIFEST}: the entry of {name} {problem}; reinstall drake_bench or rebuild with `{REBUILD}`"
        )
    return entry


def _entry_problem(entry: Any) -> str | None:
    """Why a manifest's model entry is not one :func:`write_manifest` writes, or None. Its file paths are read,
    hashed and uploaded, so each must name a file inside the model's folder."""
    if not isinstance(entry, dict):
        return f"is not a JSON object (it is a {type(entry).__name__})"
    files = entry.get("files")
    if not isinstance(files, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        return "has no 'files' object of file paths and sha256 strings"
    for rel in files:
        parts = rel.split("/")
        if not rel or rel.startswith("/") or "\\" in rel or any(p in ("", ".", "..") for p in parts):
            return f"lists the file {rel!r}, which is not a path inside the model's folder"
    for key in ("weights_sha256", "hub_repo"):
        if not isinstance(entry.get(key), str):
            return f"has no {key!r} string"
    return None


def verify_shipped(name: str, root: str | Path | None = None) -> Path:
    """The folder of shipped model ``name``, after checking every file against the manifest's sha256.

    Raises :class:`~drake_bench.errors.CheckpointError` naming the file, the recorded and the actual
    hash when a file was modified, and naming it when it is missing or not in the manifest; the
    message says how to get the right bytes back (reinstall, or ``python scripts/build_zoo.py``).
    """
    root = _root(root)
    entry = _entry(name, root)
    folder = root / name
    if not folder.is_dir():
        raise _missing(f"{root / MANIFEST} lists {name!r} but its folder {folder} does not exist")
    recorded: dict[str, str] = entry.get("files", {})
    fix = f"reinstall drake_bench, or rebuild the shipped zoo with `{REBUILD}`"
    if entry.get("weights_sha256") != recorded.get(WEIGHTS_FILE):
        raise CheckpointError(
            f"{root / MANIFEST}: {name}'s weights_sha256 {entry.get('weights_sha256')} is not the "
            f"sha256 it records for {WEIGHTS_FILE} ({recorded.get(WEIGHTS_FILE)}); {fix}"
        )
    for rel, expected in sorted(recorded.items()):
        path = folder / rel
        if not path.is_file():
            raise CheckpointError(
                f"{path}: missing; {root / MANIFEST} records sha256 {expected} for it ({name}); {fix}"
            )
        actual = file_sha256(path)
        if actual != expected:
            raise CheckpointError(
                f"{path}: sha256 {actual}, but {root / MANIFEST} records {expected}: the shipped "
                f"checkpoint of {name} was modified or corrupted; {fix}"
            )
    extra = sorted(set(_files(folder)) - set(recorded))
    if extra:
        raise CheckpointError(
            f"{folder}: files not recorded in {root / MANIFEST}: {extra} (they could change what "
            f"from_pretrained loads); remove them, or {fix}"
        )
    return folder


def shipped_identity(name: str, root: str | Path | None = None) -> dict[str, Any]:
    """What fixes a shipped model's weights, as a result file records it (the sha256 of its safetensors)."""
    entry = _entry(name, _root(root))
    return {
        "source": IDENTITY_SOURCE,
        "name": name,
        "weights_sha256": entry["weights_sha256"],
        "hub_repo": entry["hub_repo"],
    }


# ---------------------------------------------------------------------- the Hub
def _plan_item(name: str, root: Path, repo_prefix: str) -> dict[str, Any]:
    folder = verify_shipped(name, root)  # never publish bytes the manifest does not vouch for
    entry = _entry(name, root)
    files = [
        {"path": rel, "sha256": sha, "bytes": (folder / rel).stat().st_size}
        for rel, sha in sorted(entry["files"].items())
    ]
    return {
        "name": name,
        "repo_id": f"{repo_prefix}/{name}",
        "repo_type": REPO_TYPE,
        "folder": str(folder),
        "files": files,
        "weights_sha256": entry["weights_sha256"],
        "bytes": sum(f["bytes"] for f in files),
    }


def publish_models(
    names: Iterable[str] | None = None,
    repo_prefix: str = HUB_PREFIX,
    dry_run: bool = True,
    token: str | None = None,
    *,
    root: str | Path | None = None,
    private: bool | None = None,
    api: Any = None,
) -> list[dict[str, Any]]:
    """Upload shipped model folders as Hub model repos ``<repo_prefix>/<name>``; returns the plan.

    ``names`` defaults to every model of the manifest. Each folder is verified first. With
    ``dry_run`` (the default) nothing touches the network: each plan item names the repo id, the
    local folder and every file with its sha256 and size. Otherwise each repo is created if needed
    (``HfApi.create_repo(repo_type="model")``) and the folder uploaded in one commit
    (``upload_folder``, only the files the manifest records); the item gains ``commit``.
    """
    root = _root(root)
    wanted = list(dict.fromkeys(names)) if names is not None else shipped_names(root)
    plan = [_plan_item(name, root, repo_prefix) for name in wanted]
    if dry_run:
        return plan
    from drake_bench.benchmarks.hub import _network_errors, _one_line

    if api is None:
        from huggingface_hub import HfApi

        api = HfApi(token=token)
    done: list[str] = []
    for item in plan:
        try:
            api.create_repo(item["repo_id"], repo_type=REPO_TYPE, exist_ok=True, private=private)
            commit = api.upload_folder(
                repo_id=item["repo_id"],
                folder_path=item["folder"],
                repo_type=REPO_TYPE,
                allow_patterns=[f["path"] for f in item["files"]],
                commit_message=f"drake_bench shipped zoo: {item['name']} (weights sha256 {item['weights_sha256'][:12]})",
            )
        except DrakeBenchError:
            raise
        except _network_errors() as exc:
            uploaded = f"uploaded so far: {', '.join(done)}" if done else "nothing was uploaded"
            raise HubError(
                f"publishing {item['name']} to Hub model repo {item['repo_id']} failed ({uploaded}): "
                f"{_one_line(exc)}. Check the network and your token (`hf auth login`, write access "
                "to the organisation), then run again"
            ) from None
        item["commit"] = getattr(commit, "oid", None)
        done.append(item["repo_id"])
    return plan


def add_shipped_to_hf_cache(
    name: str,
    repo_id: str | None = None,
    *,
    root: str | Path | None = None,
    cache_dir: str | Path | None = None,
    commit: str | None = None,
    refs: tuple[str, ...] = ("main",),
) -> str:
    """Place shipped model ``name`` in the Hub cache as if its Hub repo had been downloaded; returns the commit.

    For machines without network (and tests): afterwards ``load_base("drake-bench/<name>")`` loads it
    with ``HF_HUB_OFFLINE=1``. The folder is verified first; ``commit`` defaults to one derived from
    the weights' sha256.
    """
    from drake_bench.benchmarks.hub import place_in_hf_cache

    root = _root(root)
    folder = verify_shipped(name, root)
    entry = _entry(name, root)
    repo_id = repo_id or entry["hub_repo"]
    commit = commit or hashlib.sha1(f"{repo_id}\0{entry['weights_sha256']}".encode()).hexdigest()
    files = ((rel, (folder / rel).read_bytes()) for rel in sorted(entry["files"]))
    return place_in_hf_cache(files, repo_id, commit, refs=refs, cache_dir=cache_dir, repo_type=REPO_TYPE)
