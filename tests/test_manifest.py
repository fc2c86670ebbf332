"""Manifests: schema validation with clear errors, content hashes, shipped manifests."""

from __future__ import annotations

import copy
import json

import pytest
from conftest import toy_spec

from drake_bench import ManifestError, UnknownNameError, available_benchmarks, load_benchmark
from drake_bench.benchmarks.manifest import content_hash, manifest_dict, parse_manifest, read_manifest, schema
from drake_bench.benchmarks.spec import BenchmarkSpec


def test_shipped_schema_matches_the_model():
    assert schema() == json.loads(json.dumps(BenchmarkSpec.model_json_schema()))


def test_round_trip_and_hash_is_stable():
    data = manifest_dict(toy_spec())
    spec = parse_manifest(data)
    assert spec.content_hash == data["content_hash"] == content_hash(data)
    assert manifest_dict(spec) == data


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d.pop("clients"), "clients"),
        (lambda d: d["fl"].update(rounds="ten"), "fl.rounds"),
        (lambda d: d.update(surprise=1), "surprise"),
        (lambda d: d["tasks"][0].update(answer_type="essay"), "tasks[0].answer_type"),
        (lambda d: d["clients"][0]["tasks"].append("nope"), "unknown tasks"),
    ],
)
def test_schema_violations_name_the_field(mutate, message, tmp_path):
    data = copy.deepcopy(manifest_dict(toy_spec()))
    mutate(data)
    data["content_hash"] = content_hash(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ManifestError) as err:
        read_manifest(path)
    assert str(path) in str(err.value) and message in str(err.value)


def test_edited_manifest_without_new_hash_is_caught(tmp_path):
    data = manifest_dict(toy_spec())
    data["description"] = "edited"
    with pytest.raises(ManifestError, match="content_hash"):
        parse_manifest(data, where="x.json")


def test_invalid_json_and_missing_file(tmp_path):
    p = tmp_path / "broken.json"
    p.write_text("{not json")
    with pytest.raises(ManifestError, match="not valid JSON"):
        read_manifest(p)
    with pytest.raises(ManifestError, match="not found"):
        read_manifest(tmp_path / "missing.json")
    with pytest.raises(UnknownNameError):
        load_benchmark("no-such-benchmark")


def test_every_shipped_manifest_validates():
    names = available_benchmarks()
    for name in names:
        spec = load_benchmark(name)
        assert spec.name == name and spec.content_hash
        for c in spec.clients:
            assert c.tasks
