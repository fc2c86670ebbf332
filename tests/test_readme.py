"""The README's quickstart runs as written (a newcomer copies it first)."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_streams_quickstart_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("DRAKE_BENCH_HOME", str(tmp_path))
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    quickstart = next(b for b in blocks if "load_client_stream(" in b and "stream.rounds()" in b)
    namespace: dict = {}
    exec(compile(quickstart, "README.md quickstart", "exec"), namespace)
    stream = namespace["stream"]
    assert stream.client == 3 and stream.scenario == "dynamic"
    assert (tmp_path / "built" / "drake-synth" / "build_info.json").is_file()
