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


def _embedded(page: str, element_id: str) -> object:
    found = re.search(rf'<script type="application/json" id="{element_id}">(.*?)</script>', page, re.S)  # fmt: skip
    assert found is not None, element_id
    return json.loads(found[1])


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
    assert "&lt;script&gt;" in side
    # the rows JSON of the run page and the case data of the case page (drawn by case.js,
    # with textContent): parsed back, the answer is the original text
    rows = _embedded(run, "rows")
    assert isinstance(rows, list) and rows[1]["a"] == HOSTILE
    data = _embedded(case, "case-data")
    assert isinstance(data, dict) and data["c"]["answer"] == HOSTILE


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
    assert case is not None and "$0.0000" not in case
    info = _embedded(case, "run-info")
    assert isinstance(info, dict) and info["priced"] is False  # case.js then says "unpriced"
    # priced (no unpriced call): the cost is shown as a number
    assert "$0.0000" in pages.run_page(report, {"kb-001": "a.html"})


def test_the_run_page_rows_carry_the_reports_own_bad_cases() -> None:
    from app.view.casedata import case_row

    leak = r.info("lower", red_line=True)
    report = r.report(
        [
            r.case("kb-001", {"acl_leak": 1.0}, red_lines=["acl_leak"]),
            r.case("kb-002", {"acl_leak": 0.0}),
        ],
        {"acl_leak": leak},
    )
    rows = [case_row(c, c.trace, "", report.bad_case(c.id), report.metrics) for c in report.cases]
    bad = report.bad_case("kb-001")
    assert bad is not None
    assert rows[0]["verdict"] == "bad-hard" and rows[0]["why"] == [x.message for x in bad.reasons]
    assert rows[1]["verdict"] == "ok" and rows[1]["why"] == []


# ---------------------------------------------------------------- exports and server


_TARGET = re.compile(
    r"^(?:\(window\.RAG_(?:CASES|ROWS) = window\.RAG_(?:CASES|ROWS) \|\| (?:\{\}|\[\])\)"
    r"(?:\[\d+\] = |\.push\()|window\.RAG_RUN = )"
)


def data_file(path: Path) -> object:
    """The JSON a data file of the static export carries (a JS expression after the
    assignment or ``push(``; a string holding the JSON when it has a ``__proto__`` key)."""
    text = path.read_text(encoding="utf-8")
    head = _TARGET.match(text)
    assert head is not None, text[:80]
    value, end = json.JSONDecoder().raw_decode(text, head.end())
    assert text[end:] in (";\n", ");\n")  # nothing else in the file
    return json.loads(value) if isinstance(value, str) else value


def test_report_html_writes_the_run_page_and_the_data_its_table_and_case_page_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from app.eval.report.io import report_json
    from app.view.pages import static_assets

    base, new = two_reports()
    a, b = tmp_path / "eval_a.json", tmp_path / "eval_b.json"
    a.write_text(base.model_dump_json(), encoding="utf-8")
    b.write_text(report_json(new), encoding="utf-8")  # the runner's line layout
    rc, out, _ = rag(["report", "html", str(b), "-o", str(tmp_path / "run.html")], capsys)
    assert rc == 0 and "+ 2 cases in run_cases/" in out
    page = (tmp_path / "run.html").read_text(encoding="utf-8")
    # the rows are not inlined: the page loads them from the folder
    assert 'id="rows"' not in page and '<script src="run_cases/rows-0.js"></script>' in page
    folder = tmp_path / "run_cases"
    rows = data_file(folder / "rows-0.js")
    assert isinstance(rows, list) and [r["id"] for r in rows] == ["kb-001", "kb-002"]
    assert rows[1]["a"] == HOSTILE and rows[0]["m"] == {"correctness": 2.0}
    # each row links the one case page with its data file's number and the id
    for row in rows:
        assert row["href"] == f"run_cases/case.html#0/{row['id']}"
    cases = data_file(folder / "c-0.js")
    assert isinstance(cases, list)
    # the case's JSON is the report's, as written (compared with the typed model's dump)
    assert [c["c"] for c in cases] == [c.model_dump(mode="json") for c in new.cases]
    assert cases[0]["x"]["verdict"] in {"ok", "bad-hard", "bad-quality"}
    info = data_file(folder / "run.js")
    assert isinstance(info, dict) and info["run_id"] == new.run_id and info["back"] == "../run.html"
    shell = (folder / "case.html").read_text(encoding="utf-8")
    assert '<link rel="stylesheet" href="./view.css">' in shell and "<style>" not in shell
    assert (
        '<script src="./run.js"></script>' in shell and '<script src="./case.js"></script>' in shell
    )
    for name, text in static_assets().items():
        assert (folder / name).read_text(encoding="utf-8") == text
    # the same report in one line (not the runner's layout) gives the same data
    one = tmp_path / "eval_one.json"
    one.write_text(new.model_dump_json(), encoding="utf-8")
    rc, _, _ = rag(["report", "html", str(one), "-o", str(tmp_path / "one.html")], capsys)
    assert rc == 0 and data_file(tmp_path / "one_cases" / "c-0.js") == cases
    # a "__proto__" key (a JS object literal would make it the prototype) goes as a string
    proto = new.model_copy(update={"cases": [new.cases[0].model_copy(update={"metrics": {**new.cases[0].metrics, "correctness": new.cases[0].metrics["correctness"].model_copy(update={"detail": {"__proto__": {"x": 1}}})}}), new.cases[1]]})  # fmt: skip
    pp = tmp_path / "eval_proto.json"
    pp.write_text(report_json(proto), encoding="utf-8")
    rc, _, _ = rag(["report", "html", str(pp), "-o", str(tmp_path / "proto.html")], capsys)
    text = (tmp_path / "proto_cases" / "c-0.js").read_text(encoding="utf-8")
    assert rc == 0 and text.startswith('(window.RAG_CASES = window.RAG_CASES || {})[0] = "[{')
    shown = data_file(tmp_path / "proto_cases" / "c-0.js")
    assert isinstance(shown, list) and shown[0]["c"]["metrics"]["correctness"]["detail"] == {"__proto__": {"x": 1}}  # fmt: skip
    # a second export replaces the set as a whole: no stale file, no temp folder left
    (folder / "stale.html").write_text("old", encoding="utf-8")
    (folder / "c-7.js").write_text("old", encoding="utf-8")
    rc, _, _ = rag(["report", "html", str(b), "-o", str(tmp_path / "run.html")], capsys)
    assert rc == 0 and not (folder / "stale.html").exists() and not (folder / "c-7.js").exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
    # … but never a folder holding something else: refused (exit 2), nothing removed
    (folder / "notes.txt").write_text("mine", encoding="utf-8")
    rc, _, err = rag(["report", "html", str(b), "-o", str(tmp_path / "run.html")], capsys)
    assert rc == 2 and "notes.txt" in err and (folder / "notes.txt").exists()

    target = tmp_path / "cmp.html"
    rc, out, _ = rag(["eval", "compare", str(a), str(b), "--format", "html", "-o", str(target)], capsys)  # fmt: skip
    assert rc == 0 and target.is_file()
    cmp_hrefs = [r["href"] for r in _embedded(target.read_text(encoding="utf-8"), "rows")]  # type: ignore[attr-defined]  # fmt: skip
    assert all((tmp_path / h).is_file() for h in cmp_hrefs) and len(cmp_hrefs) == 2
    page = target.read_text(encoding="utf-8")
    from app.eval.compare import LABEL

    assert any(f"{label}" in page for label in LABEL.values() if label != "no paired values")

    bad = tmp_path / "eval_bad.json"
    bad.write_text("{not json", encoding="utf-8")
    rc, _, err = rag(["report", "html", str(bad)], capsys)
    assert rc == 2 and "eval_bad.json:1" in err and "Traceback" not in err


def _lines(report: r.Report) -> list[str]:
    from app.eval.report.io import report_json

    return report_json(report).split("\n")


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda c: {**c, "cost_usd": "free"}, ":3 (case kb-002): not a valid case: cost_usd"),
        (lambda c: {**c, "id": "kb-001"}, ":3: case id 'kb-001' appears twice"),
        (
            lambda c: {**c, "metrics": {"correctness": {"value": None}}},
            ":3 (case kb-002): metrics/correctness: null without a reason",
        ),
    ],
)
def test_report_html_refuses_a_bad_case_line_naming_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: object, expected: str
) -> None:
    _, new = two_reports()
    lines = _lines(new)
    case = json.loads(lines[2])
    lines[2] = json.dumps(edit(case), ensure_ascii=False)  # type: ignore[operator]
    path = tmp_path / "eval_x.json"
    path.write_text("\n".join(lines), encoding="utf-8")
    rc, _, err = rag(["report", "html", str(path)], capsys)
    assert rc == 2 and f"eval_x.json{expected}" in err and "Traceback" not in err
    assert not (tmp_path / "eval_x.html").exists()
    # the full typed reader refuses the same file
    from app.errors import ReportError
    from app.eval.report.io import load_report

    with pytest.raises(ReportError):
        load_report(path)


def test_report_html_refuses_nan_and_a_missing_sent_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, new = two_reports()
    lines = _lines(new)
    nan = tmp_path / "eval_nan.json"
    nan.write_text("\n".join([lines[0], lines[1].replace('"cost_usd":0.0', '"cost_usd":NaN'), *lines[2:]]), encoding="utf-8")  # fmt: skip
    assert "NaN" in nan.read_text(encoding="utf-8")
    rc, _, err = rag(["report", "html", str(nan)], capsys)
    assert rc == 2 and "eval_nan.json:2" in err and "NaN is not a JSON number" in err
    # a sent message stored by hash whose text the report does not hold
    case = json.loads(lines[2])
    case["trace"] = {"latency_ms": 1.0, "sent": [{"role": "system", "sha256": "ab" * 32, "chars": 3, "content": None}]}  # fmt: skip
    hashed = tmp_path / "eval_sent.json"
    hashed.write_text("\n".join([*lines[:2], json.dumps(case), *lines[3:]]), encoding="utf-8")
    rc, _, err = rag(["report", "html", str(hashed)], capsys)
    assert rc == 2 and "eval_sent.json:3: case kb-002: sent system message abababababab" in err


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


def test_the_case_page_carries_the_sent_texts_a_report_stores_once() -> None:
    """A merged report keeps each sent text once (``sent_texts``, by hash): the case page's
    data carries the texts its messages refer to (drawn by case.js; the browser test
    tests/e2e/test_e2e_viewer.py checks what is shown)."""
    from app.eval.report.io import _shared_texts
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
    assert html is not None and "<script>alert" not in html
    data = _embedded(html, "case-data")
    assert isinstance(data, dict)
    sent = data["c"]["trace"]["sent"]
    assert [m["content"] for m in sent] == [None, None] and sent[1]["cut"] == 3
    assert [data["x"]["texts"][m["sha256"]] for m in sent] == [
        "你是助手。" + HOSTILE,
        "问" * SENT_MESSAGE_LIMIT,
    ]
