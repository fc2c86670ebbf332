"""drake_bench: benchmarks, streams, method plugins and a standard evaluator for personalized FL."""

from __future__ import annotations

from drake_bench._version import __version__
from drake_bench.benchmarks.manifest import available_benchmarks, load_benchmark  # noqa: E402
from drake_bench.benchmarks.sample import AnswerType, MethodSample, Sample  # noqa: E402
from drake_bench.benchmarks.spec import BenchmarkSpec, ClientSpec, TaskSpec  # noqa: E402
from drake_bench.errors import (  # noqa: E402
    CheckpointError,
    DataError,
    DataIntegrityError,
    DataNotBuiltError,
    DrakeBenchError,
    HubError,
    IntegrityError,
    LeakageError,
    ManifestError,
    PluginError,
    ScenarioError,
    UnknownNameError,
)
from drake_bench.evaluation.standalone import evaluate_client  # noqa: E402
from drake_bench.evaluator.run_config import RunConfig  # noqa: E402
from drake_bench.evaluator.standard import run  # noqa: E402
from drake_bench.plugins.protocol import (  # noqa: E402
    AdaptationInit,
    ClientContext,
    Diagnostic,
    FederationContext,
    Message,
    Method,
    MethodMeta,
    ModelIdentity,
    PostFederation,
    ReportsClientDiagnostics,
    ReportsDiagnostics,
    ReportsModels,
    State,
    TrainsClientsTogether,
)
from drake_bench.plugins.registry import available_methods, create_method, register_method  # noqa: E402
from drake_bench.runner import run_methods  # noqa: E402
from drake_bench.streams.scenarios import Asynchronous, Dirichlet, Dynamic, Static, parse_scenario  # noqa: E402
from drake_bench.streams.stream import ClientStream, FederatedData, load_client_stream, load_federated_data  # noqa: E402

__all__ = [
    "__version__",
    "AdaptationInit",
    "ClientContext",
    "Diagnostic",
    "FederationContext",
    "Message",
    "Method",
    "MethodMeta",
    "ModelIdentity",
    "PostFederation",
    "ReportsClientDiagnostics",
    "TrainsClientsTogether",
    "ReportsDiagnostics",
    "ReportsModels",
    "RunConfig",
    "State",
    "available_methods",
    "create_method",
    "register_method",
    "run",
    "run_methods",
    "AnswerType",
    "Asynchronous",
    "BenchmarkSpec",
    "ClientSpec",
    "CheckpointError",
    "ClientStream",
    "DataError",
    "DataIntegrityError",
    "FederatedData",
    "DataNotBuiltError",
    "Dirichlet",
    "DrakeBenchError",
    "Dynamic",
    "HubError",
    "IntegrityError",
    "LeakageError",
    "ManifestError",
    "MethodSample",
    "PluginError",
    "Sample",
    "ScenarioError",
    "Static",
    "TaskSpec",
    "UnknownNameError",
    "available_benchmarks",
    "evaluate_client",
    "load_benchmark",
    "load_client_stream",
    "load_federated_data",
    "parse_scenario",
]
