"""The leaderboard as a product: canonical boards as data, their rules in code, submissions and a static web page.

* :mod:`.boards`: typed board definitions (``definitions/*.json``), loaded by name or path;
* :mod:`.build`: the plan of a board (what is done, what resumes, what is missing) and ``drake-bench run`` for the rest;
* :mod:`.rules`: every rule a result file must pass to be ranked, each refusal naming the rule and the file;
* :mod:`.submission`: the self-contained folder a contributor opens a pull request with;
* :mod:`.render` and :mod:`.html`: summary, plot and one self-contained HTML page per board, from result files only.

The command line is ``drake-bench leaderboard`` (drake_bench/commands/leaderboard.py).
"""

from drake_bench.leaderboard.boards import BoardDefinition, BoardEntry, BoardError, canonical_boards, load_board
from drake_bench.leaderboard.rules import RULES, Refusal, validate

__all__ = ["RULES", "BoardDefinition", "BoardEntry", "BoardError", "Refusal", "canonical_boards", "load_board",
           "validate"]
