"""`rag view` and the static export (`rag report html`, opened from disk) in a real
headless Chromium (tests/support/browser.py): real offline runs of the shipped smoke suite
with system/kb_qa v1 and v2, then open the runs list, a run, filter its cases, open a case,
open the compare and see the word diff. A third run whose answer is a ``<script>`` shows it
as text and runs nothing; so does a case whose id, question, tags, errors and sent prompt
are markup, in the static export. A 10,000-case export opens and its filter answers.

Screenshots of a run, a case and a compare go to ``tmp_path``; with
``RAG_VIEWER_SCREENSHOTS=docs/img`` (``make screenshots``) they are written there for the
README.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from app.eval.report.records import CaseResult, Report
from tests.support import browser as browser_support

browser = browser_support.browser  # pytest fixtures: a real headless Chromium
page = browser_support.page

HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'


def _edit(case: CaseResult) -> CaseResult:
    """Drop the answer's first clause and add a sentence: a word-level change to diff."""
    text = case.answer or ""
    _, sep, rest = text.partition("，")
    return case.model_copy(update={"answer": (rest if sep else text) + "请以最新制度为准。"})


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list[Report]]]:
    from app.eval.config import RunConfig
    from app.eval.run.runner import run_sync

    folder = tmp_path_factory.mktemp("runs")
    reports: list[Report] = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RAG_CACHE_DIR", str(folder / "cache"))
        mp.setenv("RAG_LOG_DIR", str(folder / "logs"))
        for version in ("system/kb_qa_v1", "system/kb_qa_v2"):
            # in a thread: Playwright's sync API owns this thread's event loop
            with ThreadPoolExecutor(1) as pool:
                config = RunConfig(suite="smoke", prompts=(version,))
                outcome = pool.submit(run_sync, config, out_dir=folder, front_end="cli").result()
            assert outcome.report is not None
            reports.append(outcome.report)
    # The offline extractive answerer does not read the system prompt, so v1 and v2 answer
    # alike offline (the compare shows "unchanged"). To see a diff, a third report is v2's
    # with the answers of its first 3 answered cases edited here (their metrics left as
    # measured), and its first case's answer replaced by markup that must stay text.
    v2 = reports[1]
    answered = [c.id for c in v2.cases if c.answer and not c.refused][:3]
    cases = [_edit(c) if c.id in answered else c for c in v2.cases]
    cases[0] = cases[0].model_copy(update={"answer": HOSTILE})
    edited = v2.model_copy(update={"cases": cases, "run_id": v2.run_id[:-6] + "fff000"})
    (folder / "eval_edited.json").write_text(edited.model_dump_json(), encoding="utf-8")
    reports.append(edited)
    yield folder, reports


@pytest.fixture(scope="module")
def server(runs: tuple[Path, list[Report]]) -> Iterator[str]:
    from app.view.server import serve_in_thread

    srv, url = serve_in_thread(runs[0])
    try:
        yield url
    finally:
        srv.shutdown()
        srv.server_close()


def _shots(tmp_path: Path) -> Path:
    target = os.environ.get("RAG_VIEWER_SCREENSHOTS")
    out = Path(target) if target else tmp_path
    out.mkdir(parents=True, exist_ok=True)
    return out


def test_run_filter_case_compare_diff(
    page: Any, server: str, runs: tuple[Path, list[Report]], tmp_path: Path
) -> None:
    v1, v2, edited = runs[1]
    shots = _shots(tmp_path)
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(server + "/")
    assert page.locator("#runs tbody tr").count() == 3
    page.locator(f"a:text-is('{v2.run_id}')").click()
    assert page.locator("h1").inner_text().startswith(f"Run {v2.run_id}")
    total = len(v2.cases)
    assert page.locator("#count").inner_text().startswith(f"{total} of {total} cases")
    assert page.locator("#cases tbody tr").count() == min(total, 50)
    page.screenshot(path=str(shots / "viewer-run.png"), full_page=False)

    # filter by a tag: the count is the report's own number of cases with that tag
    tag = sorted({t for c in v2.cases for t in c.tags})[0]
    expected = sum(1 for c in v2.cases if tag in c.tags)
    page.select_option("#f-tag", tag)
    assert page.locator("#count").inner_text().startswith(f"{expected} of {total}")
    assert page.locator("#cases tbody tr").count() == expected
    # search by a case id, then keyboard: j moves the selection, Enter opens the case
    page.select_option("#f-tag", "")
    target = v2.cases[1]
    page.keyboard.press("/")
    page.keyboard.type(target.id)
    assert page.locator("#cases tbody tr").count() == 1
    page.keyboard.press("Escape")
    page.keyboard.press("j")
    page.keyboard.press("Enter")
    page.wait_for_url(f"**/case/{target.id}")
    assert target.question in page.locator("#question").inner_text()
    assert page.locator("#golden").count() == 1 and page.locator("#golden").inner_text().strip()
    if target.trace and target.trace.retrieved:
        assert page.locator("#chunks tbody tr").count() == len(target.trace.retrieved)
    # the prompt exactly as sent: every message of the answer call, from the report's texts
    assert target.trace is not None and target.trace.sent
    shown = page.locator("#prompt pre.sent").all_inner_texts()
    expected = [str(v2.sent_text(m)) for m in target.trace.sent]
    assert [t.strip() for t in shown] == [t.strip() for t in expected]
    page.screenshot(path=str(shots / "viewer-case.png"), full_page=False)
    page.locator("#prompt").screenshot(path=str(shots / "viewer-prompt.png"))

    # compare v1 → v2 (two real runs) from the runs list: tick both, press compare
    page.goto(server + "/")
    page.check(f"input[value='{v1.run_id}']")
    page.check(f"input[value='{v2.run_id}']")
    page.click("#compare-btn")
    page.wait_for_url(f"**/compare/{v1.run_id}/{v2.run_id}")
    assert page.locator("#delta tbody tr").count() >= len(v2.metrics)
    same = sum(1 for c in v2.cases if (v1.case(c.id) or c).answer == c.answer)
    page.select_option("#f-verdict", "changed")
    assert page.locator("#count").inner_text().startswith(f"{len(v2.cases) - same} of")

    # v1 → the edited copy: 3 changed answers, each with a word diff
    page.goto(f"{server}/compare/{v1.run_id}/{edited.run_id}")
    page.select_option("#f-verdict", "changed")
    assert page.locator("#count").inner_text().startswith("3 of")
    page.screenshot(path=str(shots / "viewer-compare.png"), full_page=False)
    page.locator("#cases tbody tr a").nth(1).click()
    page.wait_for_url("**/case/**")
    assert page.locator("#diff-new ins").first.inner_text() == "请以最新制度为准。"
    deleted = page.locator("#diff-base del").first.inner_text()
    assert deleted and deleted.endswith("，") and "，" not in deleted[:-1]
    page.screenshot(path=str(shots / "viewer-diff.png"), full_page=False)


def test_an_answer_with_markup_renders_as_text(
    page: Any, server: str, runs: tuple[Path, list[Report]]
) -> None:
    hostile = runs[1][2]  # the edited copy: its first case's answer is HOSTILE
    cid = hostile.cases[0].id
    page.goto(f"{server}/run/{hostile.run_id}")
    page.fill("#f-search", "window.__pwned")
    assert page.locator("#cases tbody tr").count() == 1
    page.goto(f"{server}/run/{hostile.run_id}/case/{cid}")
    assert HOSTILE in page.locator("#answer").inner_text()
    assert page.evaluate("window.__pwned") is None
    assert page.locator("#answer script, #answer img").count() == 0


# ---------------------------------------------------------------- the static export


def _export(report: Path, out: Path) -> None:
    from app.view.export import export_run
    from app.view.stream import read_cases

    export_run(read_cases(report), out)


def _report_file(folder: Path, report: Report) -> Path:
    """The file the runner wrote for ``report`` (the runner's line layout)."""
    return next(folder.glob(f"eval_*-{report.run_id[-6:]}.json"))


def test_the_static_export_opened_from_disk_filters_sorts_and_opens_cases(
    page: Any, runs: tuple[Path, list[Report]], tmp_path: Path
) -> None:
    folder, (_, v2, _) = runs
    out = tmp_path / "site" / "run.html"
    _export(_report_file(folder, v2), out)
    page.goto(out.as_uri())
    total = len(v2.cases)
    assert page.locator("h1").inner_text().startswith(f"Run {v2.run_id}")
    assert page.locator("#count").inner_text().startswith(f"{total} of {total} cases")
    assert page.locator("#cases tbody tr").count() == min(total, 50)
    tag = sorted({t for c in v2.cases for t in c.tags})[-1]
    page.select_option("#f-tag", tag)
    expected = sum(1 for c in v2.cases if tag in c.tags)
    assert page.locator("#count").inner_text().startswith(f"{expected} of {total}")
    assert page.locator("#cases tbody tr").count() == min(expected, 50)
    page.select_option("#f-tag", "")
    page.click("#cases th button[data-sort='id']")  # sorted by id: a click reverses it
    assert page.locator("#cases tbody tr a").first.inner_text() == max(c.id for c in v2.cases)
    # open a case from its row's link: the one case page draws it from its data file
    target = next(c for c in v2.cases if c.trace is not None and c.trace.sent and c.trace.retrieved)  # fmt: skip
    assert target.trace is not None
    page.fill("#f-search", target.id)
    page.locator(f"#cases tbody tr a:text-is('{target.id}')").click()
    page.wait_for_url("**/case.html#**")
    assert page.locator("h1").inner_text().startswith(f"Case {target.id}")
    assert target.question in page.locator("#question").inner_text()
    assert page.locator("#golden").inner_text().strip()
    assert page.locator("#chunks tbody tr").count() == len(target.trace.retrieved)
    shown = page.locator("#prompt pre.sent").all_inner_texts()
    assert [t.strip() for t in shown] == [str(v2.sent_text(m)).strip() for m in target.trace.sent]
    judges = [n for n, m in v2.metrics.items() if m.kind == "judge"]
    assert page.locator("table.judge").count() == sum(1 for n in judges if n in target.metrics)
    page.click("#back")
    page.wait_for_url("**/run.html")
    assert page.locator("#count").inner_text().startswith(f"{total} of {total} cases")


HOSTILE_ID = """x"'><script>window.__pwned = 3</script>#/%"""


def test_a_hostile_case_in_the_static_export_shows_as_text_and_runs_nothing(
    page: Any, runs: tuple[Path, list[Report]], tmp_path: Path
) -> None:
    from app.eval.report.io import report_json
    from app.generation.pipeline.trace import SENT_MESSAGE_LIMIT, SentMessage

    edited = runs[1][2]
    first = edited.cases[0]
    assert first.trace is not None
    sent = [SentMessage.of("system", HOSTILE), SentMessage.of("user", "问" * (SENT_MESSAGE_LIMIT + 3))]  # fmt: skip
    hostile = first.model_copy(
        update={
            "id": HOSTILE_ID, "question": HOSTILE, "tags": [HOSTILE], "errors": [HOSTILE],
            "trace": first.trace.model_copy(update={"sent": sent}),
        }
    )  # fmt: skip
    report = edited.model_copy(update={"cases": [hostile, *edited.cases[1:]]})
    src = tmp_path / "eval_hostile.json"
    src.write_text(report_json(report), encoding="utf-8")
    out = tmp_path / "h.html"
    _export(src, out)
    page.goto(out.as_uri())
    page.fill("#f-search", "__pwned = 3")
    assert page.locator("#cases tbody tr").count() == 1
    assert page.locator("#cases tbody tr a").inner_text() == HOSTILE_ID
    assert page.locator("#cases script, #cases img").count() == 0
    page.locator("#cases tbody tr a").click()
    page.wait_for_url("**/case.html#**")
    assert page.locator("h1").inner_text().startswith(f"Case {HOSTILE_ID}")
    assert page.locator("#question").inner_text() == HOSTILE
    assert HOSTILE in page.locator("#answer").inner_text()
    assert page.locator("#case-flags .tag").inner_text() == HOSTILE
    assert HOSTILE in page.locator("p.fail").first.inner_text()
    shown = page.locator("#prompt pre.sent").all_inner_texts()
    assert shown == [HOSTILE, "问" * SENT_MESSAGE_LIMIT]
    assert (
        page.locator("#prompt")
        .inner_text()
        .count(f"… 3 more characters not kept (a trace keeps {SENT_MESSAGE_LIMIT} per message)")
        == 1
    )
    assert "this case id is not in the run's dataset file" in page.locator("main").inner_text()
    assert page.locator("main script, main img").count() == 0
    assert page.evaluate("window.__pwned") is None


def test_the_served_case_page_draws_the_same_data(
    page: Any, server: str, runs: tuple[Path, list[Report]]
) -> None:
    """rag view's case page: the same renderer (case.js), fed the case embedded in the page."""
    from urllib.parse import quote

    _, v2, _ = runs[1]
    failed = next((c for c in v2.cases if c.trace is None), None)
    target = next(c for c in v2.cases if c.trace is not None and c.trace.sent)
    page.goto(f"{server}/run/{v2.run_id}/case/{quote(target.id, safe='')}")
    assert page.locator("h1").inner_text().startswith(f"Case {target.id}")
    shown = page.locator("#prompt pre.sent").all_inner_texts()
    assert [t.strip() for t in shown] == [str(v2.sent_text(m)).strip() for m in target.trace.sent]
    assert page.locator("#timing").inner_text().startswith("latency ")
    if failed is not None:
        page.goto(f"{server}/run/{v2.run_id}/case/{quote(failed.id, safe='')}")
        assert "no trace: the pipeline failed before it produced one" in page.locator("#prompt").inner_text()  # fmt: skip


def _repeated(src: Path, dest: Path, n: int) -> list[dict[str, Any]]:
    """A report of ``n`` cases in the runner's line layout: ``src``'s cases repeated with
    new ids (its bad cases too). Returns the cases."""
    head, *lines = src.read_text(encoding="utf-8").split("\n")
    cases = [json.loads(line.rstrip(",")) for line in lines if line.startswith("{")]
    summary = json.loads(head.removesuffix(',"cases":[') + "}")
    bad = {b["id"]: b for b in summary["bad_cases"]}
    out: list[dict[str, Any]] = []
    summary["bad_cases"] = []
    for i in range(n):
        case = {**cases[i % len(cases)], "id": f"{cases[i % len(cases)]['id']}-{i:05d}"}
        out.append(case)
        old = cases[i % len(cases)]["id"]
        if old in bad:
            summary["bad_cases"].append({**bad[old], "id": case["id"]})
    body = ",\n".join(json.dumps(c, ensure_ascii=False) for c in out)
    text = json.dumps(summary, ensure_ascii=False)[:-1] + ',"cases":[\n' + body + "\n]}\n"
    dest.write_text(text, encoding="utf-8")
    return out


def test_a_10000_case_export_opens_and_its_filter_answers(
    page: Any, runs: tuple[Path, list[Report]], tmp_path: Path
) -> None:
    folder, (_, v2, _) = runs
    big = tmp_path / "eval_big.json"
    cases = _repeated(_report_file(folder, v2), big, 10_000)
    out = tmp_path / "big.html"
    _export(big, out)
    page.goto(out.as_uri())
    assert page.locator("#count").inner_text().startswith("10000 of 10000 cases · page 1/200")
    assert page.locator("#cases tbody tr").count() == 50
    tag = sorted({t for c in cases for t in c["tags"]})[0]
    page.select_option("#f-tag", tag)
    expected = sum(1 for c in cases if tag in c["tags"])
    assert page.locator("#count").inner_text().startswith(f"{expected} of 10000")
    page.select_option("#f-tag", "")
    last = cases[-1]
    page.fill("#f-search", last["id"])
    assert page.locator("#cases tbody tr").count() == 1
    page.locator("#cases tbody tr a").click()
    page.wait_for_url("**/case.html#**")
    assert page.locator("h1").inner_text().startswith(f"Case {last['id']}")
    assert last["question"] in page.locator("#question").inner_text()


def test_the_run_page_filters_by_outcome_class(
    page: Any, server: str, runs: tuple[Path, list[Report]]
) -> None:
    """Every case shows its outcome class; the outcome filter keeps exactly the report's
    cases of that class, its option says how many there are."""
    v2 = runs[1][1]
    total = len(v2.cases)
    page.goto(server + "/")
    page.locator(f"a:text-is('{v2.run_id}')").click()
    assert page.locator("#outcomes").inner_text().startswith("Outcomes: ")
    present = [o for o, n in v2.outcomes.items() if n]
    assert len(present) >= 2  # the offline smoke run fails some cases: a real filter
    for outcome in present:
        expected = sorted(c.id for c in v2.cases if c.outcome == outcome)
        option = page.locator(f"#f-outcome option[value='{outcome}']")
        assert option.inner_text().endswith(f"({len(expected)})")
        page.select_option("#f-outcome", outcome)
        assert page.locator("#count").inner_text().startswith(f"{len(expected)} of {total}")
        shown = sorted(page.locator("#cases tbody tr a").all_inner_texts())
        assert shown == expected[:50]
        cells = page.locator(f"#cases tbody td.outcome-{outcome}")
        assert cells.count() == min(len(expected), 50)
    page.select_option("#f-outcome", "")
    assert page.locator("#count").inner_text().startswith(f"{total} of {total}")
    # the compare page filters its paired cases by the new run's outcome class the same way
    v1 = runs[1][0]
    page.goto(f"{server}/compare/{v1.run_id}/{v2.run_id}")
    for outcome in present:
        expected = sorted(c.id for c in v2.cases if c.outcome == outcome)
        option = page.locator(f"#f-outcome option[value='{outcome}']")
        assert option.inner_text().endswith(f"({len(expected)})")
        page.select_option("#f-outcome", outcome)
        assert page.locator("#count").inner_text().startswith(f"{len(expected)} of {total}")
        assert sorted(page.locator("#cases tbody tr a").all_inner_texts()) == expected[:50]
    page.select_option("#f-outcome", "")
    assert page.locator("#count").inner_text().startswith(f"{total} of {total}")
