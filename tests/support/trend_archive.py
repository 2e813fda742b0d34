"""A nightly archive for the trend page's tests: whole runs of two candidate models over
three nights (one of them merged from shards), plus that night's shard reports — which the
trend page must leave out — and one run of another suite."""

from __future__ import annotations

from pathlib import Path

from app.eval.report.records import Report, ShardInfo
from tests.support import reports as r

NIGHTS = ("2026-11-28T18:30:00Z", "2026-11-29T18:30:00Z", "2026-11-30T18:30:00Z")
MODELS = ("anthropic:claude-sonnet-4-6", "local:smollm2")


def _run(run_id: str, model: str, created_at: str, value: float, suite: str = "full") -> Report:
    m = {"correctness": r.info(kind="judge", unit="score", scale="continuous")}
    cases = [r.case(f"c-{i}", {"correctness": value + (i % 3) * 0.1}) for i in range(6)]
    report = r.report(cases, m, run_id=run_id, candidate=model, suite=suite)
    return report.model_copy(update={"created_at": created_at})


def write_archive(folder: Path) -> dict[str, list[str]]:
    """Write the archive; returns the run ids by kind (whole, shard)."""
    folder.mkdir(parents=True, exist_ok=True)
    ids: dict[str, list[str]] = {"whole": [], "shard": []}
    for night, created in enumerate(NIGHTS):
        for k, model in enumerate(MODELS):
            run_id = f"202611{28 + night}T183000Z-{k}{night}aaaa"
            report = _run(run_id, model, created, 3.0 + night * 0.2 - k)
            if night == 2 and k == 0:  # the merged run of four shards
                shards = [f"{run_id[:-4]}bbb{i}" for i in range(1, 5)]
                report = report.model_copy(
                    update={"meta": report.meta.model_copy(update={"merged_from": shards})}
                )
                for i, shard_id in enumerate(shards, 1):
                    part = _run(shard_id, model, created, 2.0)
                    info = ShardInfo(index=i, count=4, cases=6, planned=24)
                    part = part.model_copy(
                        update={"meta": part.meta.model_copy(update={"shard": info})}
                    )
                    (folder / f"eval_{shard_id}.json").write_text(part.model_dump_json(), "utf-8")
                    ids["shard"].append(shard_id)
            (folder / f"eval_{run_id}.json").write_text(report.model_dump_json(), "utf-8")
            ids["whole"].append(run_id)
    smoke = _run("20261130T190000Z-5e0ce0", MODELS[0], NIGHTS[2], 4.0, suite="smoke")
    (folder / "eval_smoke.json").write_text(smoke.model_dump_json(), "utf-8")
    ids["whole"].append(smoke.run_id)
    return ids
