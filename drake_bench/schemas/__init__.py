"""The JSON Schemas of drake_bench's file formats (manifest, result file), shipped as package data."""
