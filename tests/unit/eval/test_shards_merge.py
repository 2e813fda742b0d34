"""``rag eval run --shard i/N`` + ``rag eval merge``: shards of one run merge into the report
one process would have written; anything that is not one run is refused by name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.errors import ReportError
from app.eval.config import RunConfig, parse_shard
from app.eval.datasets.case import load_suite
from app.eval.report.io import report_json
from app.eval.report.merge import merge_reports
from app.eval.report.records import Report
from app.eval.run.runner import run_sync, select_cases, shard_of

LIMIT = 12


def _run(tmp: Path, name: str, **kw: Any) -> Report:
    config = RunConfig(suite="smoke", limit=LIMIT, **kw)
    out = run_sync(config, out_dir=tmp / name, runs_root=tmp / "runs", write=False)
    return out.report


def _comparable(report: Report) -> dict[str, Any]:
    def case(c: Any) -> Any:
        metrics = {n: s.value for n, s in c.metrics.items() if n not in ("latency_s", "cost_usd")}
        return (c.answer, c.refused, c.errors, c.red_lines, metrics)

    summary = {
        k: (d.n, d.mean, d.ci95) for k, d in report.summary.items() if k not in ("latency_s",)
    }
    return {
        "cases": {c.id: case(c) for c in report.cases},
        "summary": summary,
        "verdicts": {k: (v.verdict, v.value) for k, v in report.verdicts.items()},
        "bad": [b.model_dump() for b in report.bad_cases],
        "breakdowns": {  # latency is the one thing two runs never share
            kind: {
                tag: {m: v for m, v in g["metrics"].items() if m != "latency_s"}
                for tag, g in groups.items()
            }
            for kind, groups in report.breakdowns.model_dump().items()
        },
        "refusals": report.refusal_confusion.model_dump(),
        "status": report.status,
    }


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("shards")
    single = _run(tmp, "single")
    shards = [_run(tmp, f"s{i}", shard=f"{i}/3") for i in (1, 2, 3)]
    return {"tmp": tmp, "single": single, "shards": shards}


def test_parse_shard_accepts_i_of_n_only() -> None:
    assert parse_shard("2/4") == (2, 4)
    for bad in ("0/4", "5/4", "x/4", "2", "2/0", "1/1001", "-1/3"):
        with pytest.raises(ValueError, match="i/N"):
            parse_shard(bad)


def test_shards_partition_the_cases_stably() -> None:
    suite = load_suite("smoke")
    everything = [c.id for c in select_cases(suite, None)]
    parts = [[c.id for c in select_cases(suite, None, f"{i}/4")] for i in range(1, 5)]
    assert sorted(cid for part in parts for cid in part) == sorted(
        everything
    )  # disjoint and complete
    assert all(parts), "a shard is empty on 43 cases"
    # stable by id: a case's shard depends on nothing but its id and N
    assert all(shard_of(cid, 4) == i + 1 for i, part in enumerate(parts) for cid in part)


def test_merged_shards_equal_one_process(runs: dict[str, Any]) -> None:
    merged = merge_reports(runs["shards"])
    assert [s.meta.shard.cases for s in runs["shards"]] and merged.meta.shard is None
    assert merged.meta.merged_from == [s.run_id for s in runs["shards"]]
    assert len(merged.cases) == LIMIT and merged.totals.cases_planned == LIMIT
    assert _comparable(merged) == _comparable(runs["single"])


def test_merge_is_idempotent_and_ignores_the_same_file_twice(runs: dict[str, Any]) -> None:
    a = merge_reports(runs["shards"])
    b = merge_reports([*runs["shards"], runs["shards"][0]])
    assert report_json(a) == report_json(b)


def test_a_missing_shard_is_refused(runs: dict[str, Any]) -> None:
    with pytest.raises(ReportError, match=r"missing shard\(s\) 2/3"):
        merge_reports([runs["shards"][0], runs["shards"][2]])


def test_two_runs_of_one_shard_are_refused(runs: dict[str, Any]) -> None:
    again = _run(runs["tmp"], "again", shard="1/3")
    with pytest.raises(ReportError, match=r"shard 1/3 is given twice"):
        merge_reports([*runs["shards"], again])


def test_a_whole_run_is_not_a_shard(runs: dict[str, Any]) -> None:
    with pytest.raises(ReportError, match="is not a shard"):
        merge_reports([runs["single"], *runs["shards"]])


def test_mixed_rulers_or_settings_are_refused(runs: dict[str, Any]) -> None:
    other = _run(runs["tmp"], "samples", shard="2/3", judge_samples=1)
    with pytest.raises(ReportError, match="judge"):
        merge_reports([runs["shards"][0], other, runs["shards"][2]])
    k3 = _run(runs["tmp"], "k3", shard="2/3", k=3)
    with pytest.raises(ReportError, match="settings that decide results: k"):
        merge_reports([runs["shards"][0], k3, runs["shards"][2]])


def _edited(report: Report, **meta: Any) -> Report:
    data = json.loads(report.model_dump_json())
    data["meta"].update(meta)
    return Report.model_validate(data)


def test_mixed_datasets_models_and_partial_shards_are_refused(runs: dict[str, Any]) -> None:
    s1, s2, s3 = runs["shards"]
    ds = json.loads(s2.model_dump_json())["meta"]["datasets"]
    ds[0]["version"] = "1.1"
    with pytest.raises(ReportError, match="dataset"):
        merge_reports([s1, _edited(s2, datasets=ds), s3])
    with pytest.raises(ReportError, match="model"):
        merge_reports([s1, _edited(s2, candidate={"provider": "openai:x", "offline": False}), s3])
    data = json.loads(s2.model_dump_json())
    data.update(partial=True, partial_reason="killed", status="partial")
    with pytest.raises(ReportError, match=r"is partial .* --resume"):
        merge_reports([s1, Report.model_validate(data), s3])


def test_overlapping_cases_are_refused(runs: dict[str, Any]) -> None:
    s1, s2, s3 = runs["shards"]
    data = json.loads(s2.model_dump_json())
    data["cases"].append(json.loads(s1.cases[0].model_dump_json()))
    data["sent_texts"].update(s1.sent_texts)  # the texts its messages refer to
    with pytest.raises(ReportError, match="shards overlap"):
        merge_reports([s1, Report.model_validate(data), s3])


def test_merge_cli_writes_once_then_says_already_merged(
    runs: dict[str, Any], tmp_path: Path
) -> None:
    from click.testing import CliRunner

    from app.cli import cli
    from app.eval.report.io import write_report

    paths = [write_report(s, tmp_path / f"in{i}")[0] for i, s in enumerate(runs["shards"])]
    args = ["eval", "merge", *map(str, paths), "--out", str(tmp_path / "merged")]
    first = CliRunner().invoke(cli, args)
    assert first.exit_code in (0, 1), first.output
    assert "merged 3 shards, 12 cases" in first.output
    written = list((tmp_path / "merged").glob("eval_*.json"))
    assert len(written) == 1
    second = CliRunner().invoke(cli, args)
    assert "already merged" in second.output
    assert list((tmp_path / "merged").glob("eval_*.json")) == written


def test_engine_counters_are_summed_key_by_key() -> None:
    from app.eval.report.merge import _sum_stats
    from app.llm.engine import EngineStats

    a = EngineStats(calls=3, cost_usd=0.5, by_provider={"openai:x": 3}, retry_budget={"used": 1})
    b = EngineStats(calls=4, cost_usd=0.25, by_provider={"openai:x": 2, "openai:y": 2})
    total = _sum_stats([a, None, b])
    assert total is not None
    assert (total.calls, total.cost_usd) == (7, 0.75)
    assert total.by_provider == {"openai:x": 5, "openai:y": 2}
    assert total.retry_budget == {"used": 1}
    assert _sum_stats([None]) is None


def test_merged_shards_keep_every_sent_text(runs: dict[str, Any]) -> None:
    merged, single = merge_reports(runs["shards"]), runs["single"]
    assert merged.sent_texts  # the merged report stores each text once …

    def sent(report: Report) -> dict[str, list[tuple[str, str | None]]]:
        return {
            c.id: [(m.sha256, report.sent_text(m)) for m in c.trace.sent]
            for c in report.cases
            if c.trace
        }

    assert sent(merged) == sent(single)  # … and every case's messages read back the same


def test_merge_of_files_is_streamed_and_equals_one_process(
    runs: dict[str, Any], tmp_path: Path
) -> None:
    """Shards in the layout a run writes are merged from the files (summaries, then one case
    at a time): no Report is built, and the written report is the one process's."""
    from app.eval.report.io import load_report, write_report, write_report_rows
    from app.eval.report.merge import merge_files

    paths = [write_report(s, tmp_path / f"in{i}")[0] for i, s in enumerate(runs["shards"])]
    merged = merge_files([paths[2], paths[0], paths[1], paths[0]])  # any order, one twice
    assert not isinstance(merged, Report)
    summary, rows = merged
    path, _ = write_report_rows(summary, rows, tmp_path / "out")
    report = load_report(path)
    assert [c.id for c in report.cases] == sorted(c.id for c in runs["single"].cases)
    assert _comparable(report) == _comparable(runs["single"])
    assert _comparable(report) == _comparable(merge_reports(runs["shards"]))
