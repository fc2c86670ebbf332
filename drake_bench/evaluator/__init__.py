"""The standard evaluator: the run's settings (``run_config``), the round loop that owns every number
(``standard``), per-round checkpoints (``checkpoint``) and the record of what a method was handed (``access``).

``from drake_bench.evaluator import Evaluator`` keeps working: it resolves from
:mod:`drake_bench.evaluator.standard`.
"""

from drake_bench.core.moved import names_from

__getattr__ = names_from(__name__, "drake_bench.evaluator.standard")
