"""The board page reads at a glance (issue #61): ranks follow the mean and name the entries they tie with, what a
result file says reaches the page inert, and, in a real browser at 1,400 px, the table fits, rows descend by mean,
the plot draws the methods picked, two methods compare client by client and Self A_last by model is there.

The pages are rendered from a few of the committed drake-synth-dynamic result files (real numbers, a heterogeneous
allocation, the paper's columns, no run needed), edited in memory the way a hostile submission could be.
"""

from __future__ import annotations

import html
import json
import random
import re
import shutil
from pathlib import Path

import pytest

from drake_bench.leaderboard.boards import canonical_boards
from drake_bench.leaderboard.html import RANK_RULE, Row, _spans, board_page, per_client, standings
from drake_bench.results.result_file import RunResult, read_result

ROOT = Path(__file__).resolve().parents[1]
BOARD = "drake-synth-dynamic"
SCRIPT = "</script><script>window.pwned=1</script>"
"""A model name a submission could give its client 1: on the page it must stay text."""
MARKUP = '<img src=x onerror="window.pwned=2">'
"""A method setting (it ends up in the row's label) that would run script if interpolated raw."""
COMMAND = "<u id=command>"
"""Markup in a row's reproduce command."""


def test_the_rank_follows_the_mean_and_ties_name_the_overlapping_entries():
    # the pair: fedavg-post-train 36.28 ± 0.10 ranked below tap 35.17 ± 1.30 under the old rule
    tap, post_train, top, low = (35.17, 1.30), (36.28, 0.10), (38.0, 0.1), (30.0, 0.5)
    got = standings([tap, post_train, top, low, (None, 0.0)])
    assert [s.rank for s in got] == [3, 2, 1, 4, None]
    assert [s.tie_text for s in got] == ["(ties 2–3)", "(ties 2–3)", "", "", ""]
    # overlap is not transitive: a wide interval ties with two entries that are resolved from each other
    wide = standings([(50.0, 0.5), (49.0, 0.1), (45.0, 5.0)])
    assert [(s.rank, s.ties) for s in wide] == [(1, (1, 3)), (2, (2, 3)), (3, (1, 2, 3))]
    assert wide[0].tie_text == "(ties 1, 3)"
    # equal means keep the order given (the page gives them sorted by label)
    assert [s.rank for s in standings([(40.0, 0.0), (40.0, 0.0)])] == [1, 2]
    assert _spans([8, 7, 1, 2, 3, 5]) == "1–3, 5, 7–8"
    assert "overlaps" in RANK_RULE and "descending order of mean" in RANK_RULE


def test_ranks_descend_with_the_mean_and_ties_are_mutual_on_random_boards():
    rng = random.Random(61)
    for _ in range(200):
        values = [(rng.uniform(20, 40), rng.uniform(0, 3)) for _ in range(rng.randint(1, 12))]
        got = standings(values)
        by_rank = sorted(range(len(values)), key=lambda i: got[i].rank)
        assert [got[i].rank for i in by_rank] == list(range(1, len(values) + 1))
        assert all(values[a][0] >= values[b][0] for a, b in zip(by_rank, by_rank[1:]))
        for i, (m, s) in enumerate(values):  # the ranks of every interval that overlaps this one, its own included
            tied = tuple(sorted(got[j].rank for j, (m2, s2) in enumerate(values) if abs(m - m2) <= s + s2))
            assert got[i].ties == (tied if len(tied) > 1 else ())


def _results(count: int = 6) -> list[RunResult]:
    """``count`` committed result files of the board, spread over its ranking (every n-th in name order)."""
    folder = ROOT / "leaderboard" / BOARD
    files = sorted(p for p in folder.rglob("result.json") if "checkpoints" not in p.relative_to(folder).parts)
    assert len(files) >= count, f"{folder} holds {len(files)} result files"
    step = len(files) // count
    return [read_result(f) for f in files[::step][:count]]


def _hostile(res: RunResult, label_setting: bool = False) -> RunResult:
    """``res`` as a submission could have written it: client 1's model named :data:`SCRIPT`, and where asked a
    method setting holding :data:`MARKUP` (so the row's label carries it)."""
    clients = {**res.model_allocation.clients, "1": SCRIPT}
    update: dict = {"model_allocation": res.model_allocation.model_copy(update={"clients": clients})}
    if label_setting:
        run_config = {**res.fl.extra.get("run_config", {}), "method_config": {"note": MARKUP}}
        update["fl"] = res.fl.model_copy(update={"extra": {**res.fl.extra, "run_config": run_config}})
    return res.model_copy(update=update)


def _rows(results: list[RunResult]) -> list[Row]:
    return [
        Row(
            label=r.label,
            method=r.method.name,
            result=r,
            files=[f"runs/{r.method.name}/result.json"],
            command=f"drake-bench run --methods {r.method.name} {COMMAND}",
            refusals=[],
        )
        for r in results
    ]


def _page(folder: Path, name: str, results: list[RunResult]) -> tuple[Path, list[RunResult]]:
    path = folder / name
    path.write_text(board_page(canonical_boards()[BOARD], _rows(results)), encoding="utf-8")
    return path, results


@pytest.fixture(scope="module")
def committed() -> list[RunResult]:
    return _results()


@pytest.fixture(scope="module")
def page(committed, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[RunResult]]:
    """A page of six committed rows, each with the hostile model name and reproduce command; with its results."""
    return _page(tmp_path_factory.mktemp("page"), "board.html", [_hostile(r) for r in committed])


@pytest.fixture(scope="module")
def long_label_page(committed, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[RunResult]]:
    """The same page with a hostile setting in its first row's label too: a label too long for the window."""
    results = [_hostile(r, label_setting=i == 0) for i, r in enumerate(committed)]
    return _page(tmp_path_factory.mktemp("page"), "long-label.html", results)


def _embedded(text: str) -> dict:
    return json.loads(re.search(r'<script type="application/json" id="board-data">(.*?)</script>', text, re.S).group(1))


def test_submitted_text_reaches_the_page_escaped(long_label_page):
    path, results = long_label_page
    text = path.read_text(encoding="utf-8")
    assert SCRIPT not in text and MARKUP not in text and COMMAND not in text
    assert "window.pwned" in text  # it is there, as text: in the drill-down and by-model table, and in the data
    assert "&lt;/script&gt;&lt;script&gt;window.pwned=1&lt;/script&gt;" in text
    data = _embedded(text)  # the script's data parses back to exactly what the files said
    assert [c[1] for m in data["methods"] for c in m["clients"] if c[0] == 1] == [SCRIPT] * len(results)
    assert {m["label"] for m in data["methods"]} == {r.label for r in results} and any(
        MARKUP in r.label for r in results
    )
    # self-contained: nothing is fetched
    assert "<script src" not in text and "<link" not in text and not re.search(r"""(src|href)=["']?https?:""", text)


def test_rows_are_in_mean_order_and_every_section_is_on_the_page(page):
    path, results = page
    text = path.read_text(encoding="utf-8")
    expected = [r.label for r in sorted(results, key=lambda r: -r.summary.aggregate.self_last.mean)]
    assert [html.unescape(m) for m in re.findall(r'<tr class="entry[^"]*" data-method="([^"]*)"', text)] == expected
    assert [m["label"] for m in _embedded(text)["methods"]] == expected
    for section in ("by-model-table", "plot-self", "compare-table", "Self vs Others", "Wall-clock seconds"):
        assert section in text
    empty = board_page(canonical_boards()[BOARD], [])
    assert "No result files yet" in empty and _embedded(empty) == {"methods": [], "top": 5}


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201 - a selenium WebDriver, imported lazily
    """Headless Chromium at 1,400 px, offline and with a fresh profile, shared by this module's browser tests; they
    skip without one."""
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install -e '.[test]')")
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    browser = next(
        (p for p in ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome") if Path(p).exists()),
        None,
    )
    driver_bin = shutil.which("chromedriver") or (
        "/usr/bin/chromedriver" if Path("/usr/bin/chromedriver").exists() else None
    )
    if browser is None or driver_bin is None:
        pytest.skip(
            "no Chromium and chromedriver installed (Debian: apt-get install chromium chromium-driver; .ci/run does)"
        )
    opts = Options()
    opts.binary_location = browser
    for arg in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
        "--window-size=1400,1000",
    ):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    chrome = webdriver.Chrome(service=Service(driver_bin), options=opts)
    try:
        yield chrome
    finally:
        chrome.quit()


def _open(driver, path: Path) -> None:  # noqa: ANN001
    """Load a page; it fits the window's 1,400 px without a sideways scroll and no submitted text ran as script."""
    driver.get(path.as_uri())
    assert driver.execute_script("return window.innerWidth") == 1400
    assert driver.execute_script("return document.documentElement.scrollWidth") <= 1400
    assert driver.execute_script("return window.pwned") is None


def _no_script_errors(driver) -> None:  # noqa: ANN001
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, errors


def test_the_page_reads_at_a_glance_in_a_real_browser(page, driver, tmp_path):
    """At 1,400 px: the table fits, method names keep to one line, rows descend by mean, the plot draws what is
    picked, the comparison shows each client's difference, the by-model table is there."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    path, results = page
    _open(driver, path)
    js = driver.execute_script
    assert js("var w=document.getElementById('board-wrap'); return w.scrollWidth <= w.clientWidth")
    assert js("return getComputedStyle(document.querySelector('#board td.label')).position") == "sticky"
    assert js("""return Array.from(document.querySelectorAll('#board td.label')).every(function(td){
                   var r=document.createRange(); r.selectNodeContents(td); return r.getClientRects().length===1;})""")
    rows = driver.find_elements(By.CSS_SELECTOR, "#board tr.entry")
    means = [float(r.find_elements(By.TAG_NAME, "td")[2].get_attribute("data-sort")) for r in rows]
    assert means == sorted(means, reverse=True) and len(means) == len(results)
    assert [r.find_elements(By.TAG_NAME, "td")[1].text.split()[0] for r in rows] == [
        str(k) for k in range(1, len(rows) + 1)
    ]

    lines = lambda: len(driver.find_elements(By.CSS_SELECTOR, "#plot-self polyline.line"))  # noqa: E731
    assert lines() == 5  # the top of the table
    driver.find_element(By.CSS_SELECTOR, "button[data-pick='none']").click()
    assert lines() == 0
    boxes = driver.find_elements(By.CSS_SELECTOR, "#plot-pick input")
    boxes[0].click()
    boxes[-1].click()
    assert lines() == 2 and len(driver.find_elements(By.CSS_SELECTOR, "#plot-others polyline.line")) == 2
    driver.find_element(By.CSS_SELECTOR, "button[data-pick='all']").click()
    assert lines() == len(results)

    by_mean = sorted(results, key=lambda r: -r.summary.aggregate.self_last.mean)
    a, b = by_mean[0], by_mean[-1]
    Select(driver.find_element(By.ID, "cmp-b")).select_by_index(len(by_mean) - 1)
    assert driver.find_element(By.ID, "cmp-head-a").text == f"A: {a.label}"
    assert driver.find_element(By.ID, "cmp-head-b").text == f"B: {b.label}"
    shown = [
        [td.text for td in tr.find_elements(By.TAG_NAME, "td")]
        for tr in driver.find_elements(By.CSS_SELECTOR, "#compare-table tr.client")
    ]
    expected = [(str(x["client"]), x["self_last"][0] - y["self_last"][0]) for x, y in zip(per_client(a), per_client(b))]
    assert [row[0] for row in shown] == [c for c, _ in expected]
    assert all(
        abs(float(row[4]) - d) <= 0.0051 and row[4].startswith("+") == (float(row[4]) > 0)
        for row, (_, d) in zip(shown, expected)
    )
    assert shown[0][1] == SCRIPT  # client 1's hostile model name, as text
    assert f"of {len(expected)} clients" in driver.find_element(By.ID, "cmp-summary").text

    by_model = driver.find_element(By.ID, "by-model-table")
    assert len(by_model.find_elements(By.CSS_SELECTOR, "tbody tr")) == len(results)
    assert "tiny-llava-llama-m" in by_model.find_element(By.TAG_NAME, "thead").text

    driver.find_element(By.ID, "toggle-cost").click()  # the cost columns fold away
    assert not driver.find_element(By.CSS_SELECTOR, "#board td.cost").is_displayed()
    _no_script_errors(driver)
    driver.save_screenshot(str(tmp_path / "board.png"))
    assert (tmp_path / "board.png").stat().st_size > 0


def test_a_label_too_long_for_the_window_scrolls_under_a_sticky_method_column(long_label_page, driver):
    """The table scrolls in its frame, not the page, and the method column stays in view while it does."""
    from selenium.webdriver.common.by import By

    path, _ = long_label_page
    _open(driver, path)
    assert any(MARKUP in r.text for r in driver.find_elements(By.CSS_SELECTOR, "#board tr.entry"))  # text, not markup
    left = driver.execute_script("""var w=document.getElementById('board-wrap'); var cell=document.querySelector('#board td.label');
        var before=cell.getBoundingClientRect().left; w.scrollLeft=w.scrollWidth;
        return [w.scrollWidth > w.clientWidth, w.scrollLeft > 0, before, cell.getBoundingClientRect().left];""")
    assert left[0] and left[1] and abs(left[2] - left[3]) <= 1  # half a border's width may go
    _no_script_errors(driver)
