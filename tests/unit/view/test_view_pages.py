"""The viewer's pages without a browser: word diff, escaping, honest labels ("no data",
"unpriced"), the static exports, the local server."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from app.cli import main
from app.llm.engine import EngineStats
from tests.support import reports as r

HOSTILE = "<script>alert('x')</script><img src=x onerror=alert(1)>"


def rag(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err


def two_reports() -> tuple[r.Report, r.Report]:
    m = {"correctness": r.info(kind="judge", unit="score", scale="continuous")}
    base = r.report(
        [
            r.case("kb-001", {"correctness": 4.0}, answer="年假为十天。", question="年假几天？"),
            r.case("kb-002", {"correctness": 3.0}, answer="The cap is 500 yuan."),
        ],
        m,
    )
    new = r.report(
        [
            r.case("kb-001", {"correctness": 2.0}, answer="年假为五天。", question="年假几天？"),
            r.case("kb-002", {"correctness": 3.0}, answer=HOSTILE, refused=True),
        ],
        m,
        run_id="20261130T200000Z-cd34ef",
    )
    return base, new


# ---------------------------------------------------------------- diff


def test_word_diff_marks_only_the_changed_word() -> None:
    from app.view.diff import word_diff

    left, right = word_diff("The cap is 500 yuan.", "The cap is 800 yuan.")
    assert [(s.op, s.text) for s in left] == [
        ("equal", "The cap is "),
        ("delete", "500"),
        ("equal", " yuan."),
    ]
    assert [(s.op, s.text) for s in right if s.op != "equal"] == [("insert", "800")]


def test_word_diff_cuts_chinese_into_words_not_the_whole_sentence() -> None:
    from app.view.diff import segments, word_diff

    base, new = "员工年假为十天，需提前申请。", "员工年假为五天，需提前申请。"
    left, right = word_diff(base, new)
    deleted = "".join(s.text for s in left if s.op == "delete")
    inserted = "".join(s.text for s in right if s.op == "insert")
    assert "十" in deleted and "五" in inserted
    assert len(deleted) <= 2 and len(inserted) <= 2  # a word, not the sentence
    assert "".join(s.text for s in left) == base and "".join(s.text for s in right) == new
    for text in (base, "A-1 e-mail 3.5%，🙂 mixed中文 text\n", ""):
        assert "".join(segments(text)) == text


# ---------------------------------------------------------------- pages


def test_a_case_answer_with_markup_is_escaped_everywhere() -> None:
    from app.eval.compare import compare_reports
    from app.view import pages

    base, new = two_reports()
    run = pages.run_page(new, {"kb-001": "a.html", "kb-002": "b.html"})
    case = pages.case_page(new, "kb-002", back="run.html")
    cmp = pages.compare_page(
        base, new, compare_reports(base, new), {"kb-001": "1", "kb-002": "2"}, "", ""
    )
    side = pages.compare_case_page(base, new, "kb-002", "c.html", "", "")
    assert case is not None and side is not None
    for page in (run, case, cmp, side):
        assert "<script>alert" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in case
    assert "&lt;script&gt;" in side
    # the rows JSON of the run page: parsed back, the answer is the original text
    rows = json.loads(re.search(r'<script type="application/json" id="rows">(.*?)</script>', run, re.S)[1])  # type: ignore[index]  # fmt: skip
    assert rows[1]["a"] == HOSTILE


def test_compare_rows_classify_each_case() -> None:
    from app.view.model import compare_rows

    base, new = two_reports()
    rows = {row["id"]: row for row in compare_rows(base, new, {"kb-001": "", "kb-002": ""})}
    assert rows["kb-001"]["regressed"] and not rows["kb-001"]["improved"]
    assert rows["kb-001"]["d"]["correctness"] == pytest.approx(-2.0)
    assert rows["kb-002"]["newly_refused"] and rows["kb-002"]["changed"]
    assert not rows["kb-002"]["regressed"]


def test_no_data_and_unpriced_are_said_not_fail_and_zero() -> None:
    from app.view import pages

    m = {
        "rewrite_accuracy": r.info(),
        "correctness": r.info(kind="judge", unit="score", scale="continuous"),
    }
    cases = [r.case("kb-001", {"rewrite_accuracy": r.score(None, "no golden_rewrite"), "correctness": 4.0})]  # fmt: skip
    report = r.report(cases, m, verdicts={"rewrite_accuracy": r.verdict("rewrite_accuracy", "no_data")})  # fmt: skip
    engine = EngineStats(calls=3, completions=3, unpriced_calls=3)
    unpriced = report.model_copy(update={"totals": report.totals.model_copy(update={"engine": engine})})  # fmt: skip
    page = pages.run_page(unpriced, {"kb-001": "a.html"})
    row = re.search(r'<th scope="row"[^>]*>rewrite_accuracy</th>(.*?)</tr>', page, re.S)
    assert row is not None and "FAIL" not in row[1] and "no data" in row[1]
    assert "$0.0000" not in page and "unpriced" in page
    case = pages.case_page(unpriced, "kb-001", back="r.html")
    assert case is not None and "$0.0000" not in case and "unpriced" in case
    # priced (no unpriced call): the cost is shown as a number
    assert "$0.0000" in pages.run_page(report, {"kb-001": "a.html"})


def test_the_run_page_rows_carry_the_reports_own_bad_cases() -> None:
    from app.view.model import case_rows

    leak = r.info("lower", red_line=True)
    report = r.report(
        [
            r.case("kb-001", {"acl_leak": 1.0}, red_lines=["acl_leak"]),
            r.case("kb-002", {"acl_leak": 0.0}),
        ],
        {"acl_leak": leak},
    )
    rows = case_rows(report, {"kb-001": "", "kb-002": ""})
    bad = report.bad_case("kb-001")
    assert bad is not None
    assert rows[0]["verdict"] == "bad-hard" and rows[0]["why"] == [x.message for x in bad.reasons]
    assert rows[1]["verdict"] == "ok" and rows[1]["why"] == []


# ---------------------------------------------------------------- exports and server


def test_report_html_and_compare_html_write_linked_pages(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, new = two_reports()
    a, b = tmp_path / "eval_a.json", tmp_path / "eval_b.json"
    a.write_text(base.model_dump_json(), encoding="utf-8")
    b.write_text(new.model_dump_json(), encoding="utf-8")
    rc, out, _ = rag(["report", "html", str(b), "-o", str(tmp_path / "run.html")], capsys)
    assert rc == 0 and "+ 2 case pages" in out
    page = (tmp_path / "run.html").read_text(encoding="utf-8")
    hrefs = [row["href"] for row in json.loads(re.search(r'id="rows">(.*?)</script>', page, re.S)[1])]  # type: ignore[index]  # fmt: skip
    assert all((tmp_path / h).is_file() for h in hrefs) and len(hrefs) == 2
    case = (tmp_path / hrefs[0]).read_text(encoding="utf-8")
    assert 'href="../run.html"' in case
    # the case pages share one stylesheet and script beside them (not inlined per page)
    assert '<link rel="stylesheet" href="./view.css">' in case and "<style>" not in case
    assert '<script src="./view.js"></script>' in case
    from app.view.pages import static_assets

    for name, text in static_assets().items():
        assert (tmp_path / "run_cases" / name).read_text(encoding="utf-8") == text
    # a second export replaces the set as a whole: no stale page, no temp folder left
    (tmp_path / "run_cases" / "stale.html").write_text("old", encoding="utf-8")
    rc, _, _ = rag(["report", "html", str(b), "-o", str(tmp_path / "run.html")], capsys)
    assert rc == 0 and not (tmp_path / "run_cases" / "stale.html").exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
    # … but never a folder holding something else: refused (exit 2), nothing removed
    (tmp_path / "run_cases" / "notes.txt").write_text("mine", encoding="utf-8")
    rc, _, err = rag(["report", "html", str(b), "-o", str(tmp_path / "run.html")], capsys)
    assert rc == 2 and "notes.txt" in err and (tmp_path / "run_cases" / "notes.txt").exists()

    target = tmp_path / "cmp.html"
    rc, out, _ = rag(["eval", "compare", str(a), str(b), "--format", "html", "-o", str(target)], capsys)  # fmt: skip
    assert rc == 0 and target.is_file()
    assert sorted(p.name for p in (tmp_path / "cmp_cases").iterdir()) == sorted([*(Path(h).name for h in hrefs), "view.css", "view.js"])  # fmt: skip
    assert "significant regression" in target.read_text(encoding="utf-8") or "within noise" in target.read_text(encoding="utf-8")  # fmt: skip

    bad = tmp_path / "eval_bad.json"
    bad.write_text("{not json", encoding="utf-8")
    rc, _, err = rag(["report", "html", str(bad)], capsys)
    assert rc == 2 and "eval_bad.json:1" in err and "Traceback" not in err


def test_server_binds_localhost_and_serves_the_pages(tmp_path: Path) -> None:
    from app.view.server import serve_in_thread

    base, new = two_reports()
    (tmp_path / "eval_a.json").write_text(base.model_dump_json(), encoding="utf-8")
    (tmp_path / "eval_b.json").write_text(new.model_dump_json(), encoding="utf-8")
    (tmp_path / "eval_broken.json").write_text("[]", encoding="utf-8")
    server, url = serve_in_thread(tmp_path)
    try:
        assert server.server_address[0] == "127.0.0.1"

        def get(path: str) -> tuple[int, str]:
            try:
                with urllib.request.urlopen(url + path, timeout=10) as resp:
                    return resp.status, resp.read().decode("utf-8")
            except urllib.error.HTTPError as exc:
                return exc.code, exc.read().decode("utf-8")

        status, home = get("/")
        assert status == 200 and base.run_id in home and new.run_id in home
        assert "eval_broken.json: unreadable" in home  # listed with its error, not skipped
        assert get(f"/run/{new.run_id}/case/kb-001")[0] == 200
        status, side = get(f"/compare/{base.run_id}/{new.run_id}/case/kb-001")
        assert status == 200 and "<del>" in side and "<ins>" in side
        assert get("/trend")[0] == 200
        assert get("/run/nope")[0] == 404
        assert get(f"/run/{new.run_id}/case/%3Cscript%3E")[0] == 404
    finally:
        server.shutdown()
        server.server_close()


def test_a_gated_metric_not_measured_is_shown_as_a_failure() -> None:
    from app.view import pages

    m = {"correctness": r.info(kind="judge", unit="score", scale="continuous")}
    verdict = r.verdict("correctness", "no_data").model_copy(update={"verdict": "not_measured"})
    report = r.report([r.case("kb-001", {})], m, verdicts={"correctness": verdict})
    page = pages.run_page(report, {"kb-001": "a.html"})
    row = re.search(r'<th scope="row"[^>]*>correctness</th>(.*?)</tr>', page, re.S)
    assert row is not None and "NOT MEASURED" in row[1] and 'class="not_measured"' in row[1]


def test_the_case_page_shows_the_prompt_as_sent_escaped_and_says_what_was_cut() -> None:
    from app.eval.report import _shared_texts
    from app.generation.pipeline.trace import SENT_MESSAGE_LIMIT, SentMessage, Trace
    from app.view import pages

    _, new = two_reports()
    trace = Trace.model_validate(
        {
            "trace_id": "t", "created_at": "2026-11-30T19:00:00Z", "model": "m",
            "user_acl": ["public"], "question": "q", "rewritten_query": "q",
            "rewrite": {"strategy": "off", "triggered": False}, "mode": "strict",
            "sent": [
                SentMessage.of("system", "你是助手。" + HOSTILE).model_dump(),
                SentMessage.of("user", "问" * (SENT_MESSAGE_LIMIT + 3)).model_dump(),
            ],
        }
    )  # fmt: skip
    texts: dict[str, str] = {}
    case = _shared_texts(new.cases[0].model_copy(update={"trace": trace}), texts)
    report = new.model_copy(update={"cases": [case, new.cases[1]], "sent_texts": texts})
    html = pages.case_page(report, "kb-001", back="run.html")
    assert html is not None
    sent = re.findall(r'<pre class="sent">(.*?)</pre>', html, re.S)
    assert (
        sent[0]
        == "你是助手。&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;"
    )
    assert sent[1] == "问" * SENT_MESSAGE_LIMIT
    assert f"… 3 more characters not kept (a trace keeps {SENT_MESSAGE_LIMIT} per message)" in html
    assert "<script>alert" not in html
    # a case from a report written before traces kept the messages says so
    old = pages.case_page(report, "kb-002", back="run.html")
    assert old is not None and '<pre class="sent">' not in old
    assert "no trace: the pipeline failed before it produced one" in old
