"""Result files: the typed record of a run (``result_file``), how its raw score tables are laid out
(``encoding``).

``from drake_bench.results import read_result, RunResult, ...`` keeps working: those names resolve from
:mod:`drake_bench.results.result_file`.
"""

from drake_bench.core.moved import names_from

__getattr__ = names_from(__name__, "drake_bench.results.result_file")
