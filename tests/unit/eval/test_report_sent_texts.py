"""The prompt as sent in reports: a run's (streamed) report keeps each case's sent messages
inline; a report built in memory (``build_report``: ``rag eval merge``) stores each distinct
text once (``sent_texts``, by sha256) and the cases refer to it; a dangling hash does not load."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from app.errors import ReportError
from app.eval.config import RunConfig
from app.eval.report.io import build_report, load_report, report_json
from app.eval.run.runner import run_sync
from app.eval.scoring.table import specs
from app.eval.scoring.thresholds import load_thresholds


def test_sent_texts_inline_in_a_run_once_per_text_in_a_built_report(tmp_path: Path) -> None:
    outcome = run_sync(RunConfig(suite="smoke", limit=4), out_dir=tmp_path, runs_root=tmp_path)
    run = outcome.report
    sent = [m for c in run.cases if c.trace for m in c.trace.sent]
    assert len(sent) >= 8  # 4 answer calls, system + user each
    for m in sent:  # the streamed report: inline, whole (short), hashed over the full text
        assert m.content is not None and m.cut == 0 and run.sent_text(m) == m.content
        assert hashlib.sha256(m.content.encode()).hexdigest() == m.sha256
    for case in run.cases:  # the user turn is the case's own question, rendered
        assert case.trace is not None and case.question in str(case.trace.sent[-1].content)

    built = build_report(
        run_id=run.run_id,
        created_at=run.created_at,
        meta=run.meta,
        metric_specs=specs(),
        cases=run.cases,
        thresholds=load_thresholds("smoke"),
        totals=run.totals,
    )
    systems = {m.sha256 for m in sent if m.role == "system"}
    assert len(systems) == 1  # one prompt version: one system text for every case …
    assert len(built.sent_texts) == len({m.sha256 for m in sent})  # … stored once
    by_case = {c.id: c for c in run.cases}
    for case in built.cases:
        assert case.trace is not None
        for m, orig in zip(case.trace.sent, by_case[case.id].trace.sent, strict=True):  # type: ignore[union-attr]
            assert m.content is None and built.sent_text(m) == orig.content
    path = tmp_path / "built.json"
    path.write_text(report_json(built), encoding="utf-8")
    assert load_report(path) == built

    # a dangling reference is a broken report: refused on load, naming the case
    data = json.loads(path.read_text(encoding="utf-8"))
    data["sent_texts"].pop(next(iter(systems)))
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    with pytest.raises(ReportError, match="not in sent_texts"):
        load_report(path)
