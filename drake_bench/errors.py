"""One exception family, so callers can catch drake_bench problems without catching library internals.

Every error names what is wrong and where (file, field, benchmark, client, task, plugin),
because a benchmark user's first question is always "which input is at fault?".
"""

from __future__ import annotations


class DrakeBenchError(Exception):
    """Base of every error drake_bench raises on purpose."""


class ManifestError(DrakeBenchError):
    """A benchmark manifest is missing, malformed or fails its JSON Schema."""


class UnknownNameError(DrakeBenchError, KeyError):
    """An unknown benchmark, client, task, scenario, model or method name."""

    def __init__(self, kind: str, name: object, known: list[str] | None = None, where: str | None = None):
        self.kind, self.name, self.known = kind, name, known or []
        hint = ""
        if self.known:
            shown = ", ".join(map(str, self.known[:20])) + (" ..." if len(self.known) > 20 else "")
            hint = f"; known {kind}s: {shown}"
        place = f" in {where}" if where else ""
        super().__init__(f"unknown {kind} {name!r}{place}{hint}")

    def __str__(self) -> str:  # KeyError would repr() the message otherwise
        return self.args[0]


class JSONFileError(DrakeBenchError):
    """A JSON file someone else wrote (a result file, ``submission.json``, a board definition, a manifest given by path,
    a checkpoint's ``progress.json``) cannot be read as JSON: missing or unreadable, larger than such a file can be, not
    UTF-8, not JSON, nested deeper than such a file is, or holding a number Python cannot read or JSON has no value for
    (NaN, Infinity). One line, naming the file and why (:func:`drake_bench.core.json_files.read_json`); ``missing`` is True
    when the file does not exist. Each reader turns it into its own error (a result file's, a manifest's, ...)."""

    def __init__(self, message: str, path: str | None = None, missing: bool = False):
        super().__init__(message)
        self.path, self.missing = path, missing


class DataNotBuiltError(DrakeBenchError):
    """The benchmark's data is not on disk (not built, not downloaded)."""


class IntegrityError(DrakeBenchError):
    """A file's content hash does not match the hash recorded for it."""


class DataError(DrakeBenchError):
    """A built benchmark's file cannot be read or decoded (truncated, corrupted, not Parquet): names the file.

    Raised by the data layer, also from inside a method call (the stream decodes lazily), so the data is blamed,
    not the plugin."""


class DataIntegrityError(IntegrityError, DataError):
    """A built shard's sha256 differs from the one recorded at build time (``build_info.json``), or the recorded
    hashes disagree with the data hash a result would cite: names the file, both hashes and how to rebuild."""


class HubError(DrakeBenchError):
    """The Hugging Face Hub could not be reached, or refused a request (network down, no or bad token, server
    error): one line saying what failed and what to check."""


class CheckpointError(DrakeBenchError):
    """A run's checkpoint (``progress.json`` or a round folder) is unreadable or incomplete; the message names the
    file and the way out (``--no-resume`` / ``resume=False`` starts the run over). Also a shipped model checkpoint
    (:mod:`drake_bench.models.shipped`) that is missing or whose file differs from its recorded sha256: the message
    names the file, both hashes and how to get the right bytes back."""


class LeakageError(DrakeBenchError, AttributeError):
    """A method tried to reach data the protocol hides from it (future samples, test splits, unseen tasks, task ids)."""


class ScenarioError(DrakeBenchError, ValueError):
    """A scenario is malformed or does not fit the benchmark (e.g. an async pattern that does not sum to the rounds),
    or a stream's seed or schedule override (rounds, local steps, batch size) is invalid."""


class SourceError(DrakeBenchError):
    """A source file for a benchmark build is missing or malformed."""


class PluginError(DrakeBenchError):
    """A method plugin failed: names the method, client and round at fault."""
