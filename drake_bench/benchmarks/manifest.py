"""Benchmark manifests: the published, versioned, hashed definition of each benchmark.

A manifest is JSON validated twice: first against the shipped JSON Schema (so
third-party tools can validate without Python), then by :class:`BenchmarkSpec`
(cross-field rules). Errors name the file and the field path.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
from pydantic import ValidationError

from drake_bench.benchmarks.spec import BenchmarkSpec, StorageRule
from drake_bench.core.json_files import MANIFEST_MAX_BYTES, read_json
from drake_bench.errors import JSONFileError, ManifestError, UnknownNameError

SCHEMA_FILE = "manifest.schema.json"


def schema() -> dict[str, Any]:
    """The JSON Schema every manifest must satisfy (shipped as package data)."""
    return json.loads(resources.files("drake_bench.schemas").joinpath(SCHEMA_FILE).read_text())


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def content_hash(manifest: dict[str, Any]) -> str:
    """sha256 of the canonical manifest without its own ``content_hash`` field."""
    body = {k: v for k, v in manifest.items() if k != "content_hash"}
    return "sha256:" + hashlib.sha256(canonical_json(body).encode()).hexdigest()


def manifest_dict(spec: BenchmarkSpec) -> dict[str, Any]:
    """Serialise a spec as a manifest, stamping its content hash."""
    data = spec.model_dump(mode="json", exclude={"content_hash"})
    if data.get("storage") == StorageRule().model_dump(mode="json"):
        del data["storage"]  # the default encoding is the one manifests had before the field: keep their hashes
    data["content_hash"] = content_hash(data)
    return data


def _format_path(path: Any) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".") or "<root>"


def parse_manifest(data: Any, where: str = "<manifest>") -> BenchmarkSpec:
    """Validate a manifest (schema, cross-field rules, hash) and return the typed spec."""
    if not isinstance(data, dict):
        raise ManifestError(f"{where}: a manifest must be a JSON object, got {type(data).__name__}")
    validator = jsonschema.Draft202012Validator(schema())
    errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        lines = [f"  - {_format_path(e.absolute_path)}: {e.message}" for e in errors[:10]]
        more = f"\n  ... and {len(errors) - 10} more" if len(errors) > 10 else ""
        raise ManifestError(f"{where} fails the manifest schema:\n" + "\n".join(lines) + more)
    try:
        spec = BenchmarkSpec.model_validate(data)
    except ValidationError as exc:
        lines = [f"  - {_format_path(e['loc'])}: {e['msg']}" for e in exc.errors()[:10]]
        raise ManifestError(f"{where} is inconsistent:\n" + "\n".join(lines)) from None
    expected = content_hash(data)
    if data.get("content_hash") and data["content_hash"] != expected:
        raise ManifestError(
            f"{where}: content_hash {data['content_hash']} does not match the manifest's content ({expected}); "
            "the file was edited without re-stamping (drake_bench.benchmarks.manifest.manifest_dict stamps a manifest; the "
            "shipped ones are written by scripts/make_synth_manifests.py and scripts/make_real_manifests.py)"
        )
    return spec.model_copy(update={"content_hash": expected})


def read_manifest(path: str | Path) -> BenchmarkSpec:
    """A manifest file given by path, validated (:func:`parse_manifest`); a file that is not JSON, or is hostile
    JSON (too large, nested too deep, ...: :func:`drake_bench.core.json_files.read_json`), is one line naming it."""
    path = Path(path)
    try:
        data = read_json(path, what="manifest", max_bytes=MANIFEST_MAX_BYTES)
    except JSONFileError as exc:
        raise ManifestError(f"manifest file not found: {path}" if exc.missing else str(exc)) from None
    return parse_manifest(data, where=str(path))


def available_benchmarks() -> list[str]:
    """Names of the manifests shipped in ``splits/``."""
    files = resources.files("drake_bench.splits")
    return sorted(p.name[: -len(".json")] for p in files.iterdir() if p.name.endswith(".json"))


def archived_benchmarks() -> list[str]:
    """``name@version`` of the superseded manifests kept in ``splits/archive/`` (results made on them stay
    reproducible: ``load_benchmark("drake-synth@1.3.0")``)."""
    folder = resources.files("drake_bench.splits").joinpath("archive")
    if not folder.is_dir():
        return []
    return sorted(p.name[: -len(".json")] for p in folder.iterdir() if p.name.endswith(".json"))


@lru_cache(maxsize=None)
def _load_shipped(name: str, archived: bool = False) -> BenchmarkSpec:
    rel = f"archive/{name}.json" if archived else f"{name}.json"
    res = resources.files("drake_bench.splits").joinpath(rel)
    try:
        text = res.read_text()
    except FileNotFoundError:
        raise UnknownNameError("benchmark", name, available_benchmarks()) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ManifestError(f"splits/{rel}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    return parse_manifest(data, where=f"splits/{rel}")


def load_benchmark(name_or_path: str | Path | BenchmarkSpec) -> BenchmarkSpec:
    """A benchmark's spec, by shipped name (``"drake"``), pinned version (``"drake-synth@1.3.0"``: the current
    manifest when it has that version, else an archived one) or manifest path."""
    if isinstance(name_or_path, BenchmarkSpec):
        return name_or_path
    text = str(name_or_path)
    if text.endswith(".json") or Path(text).is_file():
        return read_manifest(text)
    if "@" in text:
        name, version = text.split("@", 1)
        if name in available_benchmarks() and _load_shipped(name).version == version:
            return _load_shipped(name)
        if text in archived_benchmarks():
            spec = _load_shipped(text, archived=True)
            if (spec.name, spec.version) != (name, version):
                raise ManifestError(f"splits/archive/{text}.json holds {spec.name}@{spec.version}, not {text}")
            return spec
        known = [f"{n}@{_load_shipped(n).version}" for n in available_benchmarks()] + archived_benchmarks()
        raise UnknownNameError("benchmark version", text, sorted(known))
    if text not in available_benchmarks():
        raise UnknownNameError("benchmark", text, available_benchmarks())
    return _load_shipped(text)
