"""The pydantic base of every drake_bench file format: manifests, result files and their raw tables."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """A record that refuses unknown fields: a misspelt key in a manifest or a result file is an error, not
    silently dropped, and the generated JSON Schemas say so (``additionalProperties: false``)."""

    model_config = ConfigDict(extra="forbid")
