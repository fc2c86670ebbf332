"""What a hostile (or careless) plugin hands the evaluator never crashes a command nor reaches the terminal raw.

Each test plants one attack through the public protocol and checks it is refused with a located error or shown
harmlessly. (The state-key attack, whose run died with a raw TypeError on resume, is in tests/test_protocol.py.)
"""

from __future__ import annotations

from pydantic import BaseModel
from rich.console import Console
from typer.testing import CliRunner

from drake_bench.cli import app
from drake_bench.console import DataTable, literal, print_table
from drake_bench.errors import PluginError
from drake_bench.protocol import MethodMeta, State
from drake_bench.registry import register_method

MARKUP = "1.0[/red]"  # a closing tag with nothing open: rich raised MarkupError on it
ESCAPE = "\x1b]0;owned\x07\x1b[2J"  # sets the terminal's title, then clears the screen


class MarkupInItsName:
    meta = MethodMeta(name="markup-in-its-name", version=MARKUP, summary=f"looks [/] harmless {ESCAPE}")

    class Config(BaseModel):
        pass

    def __init__(self, config: Config | None = None):
        self.config = config or self.Config()

    def setup(self, federation):
        pass

    def init_client(self, ctx):
        return State()

    def init_server(self):
        return State()

    def client_update(self, ctx, state, message, batches):
        return State(), state

    def aggregate(self, round_idx, server_state, uploads):
        return {c: State() for c in uploads}, server_state

    def predict(self, ctx, state, queries):
        return ["" for _ in queries]


register_method(MarkupInItsName)


def _printed(renderable) -> str:
    console = Console(record=True, width=200, force_terminal=True)
    console.print(renderable)
    return console.export_text()


def test_literal_text_reads_no_markup_and_sends_no_control_character():
    text = literal(f"{MARKUP} {ESCAPE}")
    out = _printed(text)
    assert "[/red]" in out and "\x1b" not in text.plain and "\\x1b]0;owned\\x07" in text.plain


def test_a_table_of_plugin_text_prints_it_as_written():
    table = DataTable(title=f"board [/] {ESCAPE}")
    table.add_column("method")
    table.add_row(f"evil {MARKUP}")
    console = Console(record=True, width=200)
    print_table(console, table)
    out = console.export_text()
    assert f"evil {MARKUP}" in out and "board [/]" in out and "\x1b" not in out


def test_list_and_describe_show_a_method_whose_meta_holds_markup_and_escapes():
    for args in (["list"], ["describe", "markup-in-its-name"]):
        result = CliRunner().invoke(app, args, env={"COLUMNS": "250"})
        assert result.exit_code == 0, (args, result.output, result.exception)
        assert MARKUP in result.output and "\x1b" not in result.output


def test_an_error_message_with_markup_is_reported_not_crashed_on():
    from drake_bench.commands.run import _fail

    console = Console(record=True, width=200, stderr=True)
    import drake_bench.commands.run as run_cmd

    saved, run_cmd._err = run_cmd._err, console
    try:
        exit_ = _fail(PluginError(f"method 'x' failed in predict: ValueError: bad [/] value {ESCAPE}"))
    finally:
        run_cmd._err = saved
    assert exit_.exit_code == 1
    out = console.export_text()
    assert "bad [/] value" in out and "\x1b" not in out
