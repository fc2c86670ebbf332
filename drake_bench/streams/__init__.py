"""Per-client streams over a built benchmark: partitioners, PFL scenarios, iteration-based ingestion schedules, and
the stream objects a researcher's own training code (``load_client_stream``) and the evaluator both read.
"""
