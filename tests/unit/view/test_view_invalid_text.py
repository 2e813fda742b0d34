"""A report holding a lone surrogate (a ``"\\ud800"`` escape in an answer: valid JSON) renders:
``rag report html`` and the viewer's run and case pages used to die on it with
``PydanticSerializationError`` / ``UnicodeEncodeError``. The writers replace it by U+FFFD."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from app.cli import main
from tests.support import reports as r


def _report_with_a_lone_surrogate(path: Path) -> r.Report:
    rep = r.report(
        [r.case("kb-001", {"correctness": 4.0}, answer="年假为十天。[1]")],
        {"correctness": r.info(kind="judge", unit="score", scale="continuous")},
    )
    data = json.loads(rep.model_dump_json())
    data["cases"][0]["answer"] = "年假为十天。[1] \ud800"
    path.write_text(json.dumps(data, indent=1), encoding="utf-8")  # writes the "\ud800" escape
    assert "\\ud800" in path.read_text(encoding="utf-8")
    return rep


def test_report_html_and_md_of_a_report_holding_a_lone_surrogate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "eval_s.json"
    _report_with_a_lone_surrogate(path)
    with pytest.raises(SystemExit) as exc:
        main(["report", "html", str(path), "-o", str(tmp_path / "s.html")])
    assert exc.value.code in (0, None), capsys.readouterr().err
    rows = (tmp_path / "s_cases" / "rows-0.js").read_text(encoding="utf-8")
    cases = (tmp_path / "s_cases" / "c-0.js").read_text(encoding="utf-8")
    assert "年假为十天。[1] \ufffd" in rows and "年假为十天。[1] \ufffd" in cases
    with pytest.raises(SystemExit) as exc:
        main(["report", "md", str(path)])
    assert exc.value.code in (0, None)


def test_the_viewer_serves_a_report_holding_a_lone_surrogate(tmp_path: Path) -> None:
    from app.view.server import serve_in_thread

    rep = _report_with_a_lone_surrogate(tmp_path / "eval_s.json")
    server, url = serve_in_thread(tmp_path)
    try:
        for page in (f"/run/{rep.run_id}", f"/run/{rep.run_id}/case/kb-001"):
            with urllib.request.urlopen(url + page, timeout=10) as resp:
                body = resp.read().decode("utf-8")
                assert resp.status == 200
            assert "\ufffd" in body or page.endswith(rep.run_id)
    finally:
        server.shutdown()
        server.server_close()
