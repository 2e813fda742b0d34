"""Staged rollout from the registry: `rag prompts canary` / `rollout status`, the refusals,
the one-line edits, and the arms a replayed day of traffic gets."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from registry_helpers import edit

from app.generation.registry import build_registry
from app.generation.registry.authoring import new_version

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts"))
import simulate_traffic  # noqa: E402

Rag = Callable[..., Any]
PID = "system/kb_qa"
T0 = "2026-12-04T00:00:00Z"


def _diff(before: str, after: str) -> tuple[list[str], list[str]]:
    a, b = before.splitlines(), after.splitlines()
    return [x for x in a if x not in b], [x for x in b if x not in a]


@pytest.fixture
def v3(lib: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The library copy with system/kb_qa_v3 written, its change summary filled in, locked.
    The default answer log is an empty folder of the test's: a checkout's own logs/answers.jsonl
    (written by any `rag ask`) must not become the rollout's evidence."""
    monkeypatch.setenv("RAG_LOG_DIR", str(tmp_path / "logs"))
    path = new_version(build_registry(lib), PID, author="tester")
    edit(path, "TODO 描述本次变更", "拒答更明确")
    return lib


def _lock(rag: Rag, lib: Path) -> None:
    r = rag("prompts", "lock", "system/kb_qa_v3", "--root", str(lib))
    assert r.code == 0 and "locked system/kb_qa_v3" in r.out, (r.out, r.err)


def test_canary_refuses_unreleasable_unlocked_and_model_incompatible(lib: Path, rag: Rag) -> None:
    path = new_version(build_registry(lib), PID, author="tester")
    # the TODO change summary: not releasable, and `lock` refuses it too
    r = rag("prompts", "canary", PID, "v3", "--root", str(lib))
    assert r.code == 2 and "not releasable: P029" in r.err and "Traceback" not in r.err, r.err
    assert "not locked" in r.err  # every reason at once
    r = rag("prompts", "lock", "system/kb_qa_v3", "--root", str(lib))
    assert r.code == 2 and "P029" in r.err
    edit(path, "TODO 描述本次变更", "拒答更明确")
    r = rag("prompts", "canary", PID, "v3", "--root", str(lib))
    assert r.code == 2 and "system/kb_qa_v3 is not locked" in r.err and "P029" not in r.err
    # a version not written for a model v2 serves
    edit(path, '"claude-opus-4-7", ', "")
    edit(path, "claude-opus-4-7, ", "")  # the header's models line says the same
    _lock(rag, lib)
    r = rag("prompts", "canary", PID, "v3", "--root", str(lib))
    assert r.code == 2 and "model-incompatible" in r.err and "claude-opus-4-7" in r.err, r.err
    assert "rollout" not in (lib / "releases.toml").read_text(encoding="utf-8")
    # an unknown version
    r = rag("prompts", "canary", PID, "v9", "--root", str(lib))
    assert r.code == 2 and "system/kb_qa_v9 has no loadable module" in r.err


def test_the_ladder_from_shadow_to_active(v3: Path, rag: Rag, tmp_path: Path) -> None:
    lib = v3
    _lock(rag, lib)
    releases = lib / "releases.toml"
    before = releases.read_text(encoding="utf-8")
    # --percent 1 would skip the shadow stage of the default plan
    r = rag("prompts", "canary", PID, "v3", "--percent", "1", "--root", str(lib))
    assert r.code == 2 and "stages are not skipped" in r.err
    r = rag("prompts", "canary", PID, "v3", "--root", str(lib), "--now", T0)
    assert r.code == 0, r.err
    removed, added = _diff(before, releases.read_text(encoding="utf-8"))
    assert removed == [] and added == [
        f'rollout = {{ candidate = "v3", stage = "shadow", percent = 0, since = "{T0}" }}'
    ]
    assert build_registry(lib).check() == []  # a valid rollout passes `rag prompts check`

    # status: where it stands and what the next step needs
    r = rag("prompts", "rollout", "status", "--root", str(lib), "--now", "2026-12-04T06:00:00Z")
    assert r.code == 0, r.err
    assert "system/kb_qa: v3 at 0 % — stage shadow (1/4) since 2026-12-04T00:00:00Z" in r.out
    assert "time: 6.0 h of ≥ 24.0 h in shadow" in r.out and "--shadow-report" in r.out

    # promotion before the minimum time, and without the shadow evidence: refused (exit 1)
    state = releases.read_text(encoding="utf-8")
    r = rag(
        "prompts", "canary", PID, "--promote", "--root", str(lib), "--now", "2026-12-04T23:00:00Z"
    )
    assert r.code == 1 and "refused" in r.err and "time: 23.0 h of ≥ 24.0 h" in r.err, r.err
    assert releases.read_text(encoding="utf-8") == state
    report = tmp_path / "shadow.json"
    report.write_text(
        json.dumps(
            {
                "kind": "shadow",
                "candidate": {"prompt": "system/kb_qa_v2"},
                "summary": {"replayed": 500, "errors": 0},
            }
        ),
        encoding="utf-8",
    )
    later = "2026-12-05T00:00:00Z"
    args = ["--root", str(lib), "--now", later, "--shadow-report", str(report)]
    r = rag("prompts", "canary", PID, "--promote", *args)
    assert r.code == 1 and "not the candidate system/kb_qa_v3" in r.err, r.err
    report.write_text(report.read_text().replace("kb_qa_v2", "kb_qa_v3"), encoding="utf-8")
    r = rag("prompts", "canary", PID, "--percent", "1", *args)
    assert r.code == 0, r.err
    removed, added = _diff(state, releases.read_text(encoding="utf-8"))
    assert len(removed) == len(added) == 1 and 'stage = "canary", percent = 1,' in added[0]

    # the 1 % stage needs 30 minutes and ≥ 20 candidate answers in the log, and no ❌
    log = tmp_path / "answers.jsonl"
    simulate_traffic.main(
        ["--out", str(log), "--root", str(lib), "--start", later, "--hours", "1",
         "--users", "3000", "--seed", "1"]
    )  # fmt: skip
    r = rag("prompts", "canary", PID, "--promote", "--root", str(lib), "--log", str(log),
            "--now", "2026-12-05T00:20:00Z")  # fmt: skip
    assert r.code == 1 and "time: 20 min of ≥ 30 min" in r.err, r.err
    r = rag("prompts", "rollout", "status", "--root", str(lib), "--log", str(log),
            "--now", "2026-12-05T01:00:00Z", "--json")  # fmt: skip
    row = json.loads(r.out)["rollouts"][0]
    assert row["stage"] == "canary" and row["ready"] and row["candidate_answers"] >= 20, row
    r = rag("prompts", "canary", PID, "--promote", "--root", str(lib), "--log", str(log),
            "--now", "2026-12-05T01:00:00Z")  # fmt: skip
    assert r.code == 0 and "to small (10 % of users" in r.out, (r.out, r.err)

    # abort: one line goes, everyone is back on v2
    state = releases.read_text(encoding="utf-8")
    r = rag("prompts", "canary", PID, "--abort", "--root", str(lib))
    assert r.code == 0 and "everyone gets the active v2" in r.out
    removed, added = _diff(state, releases.read_text(encoding="utf-8"))
    assert len(removed) == 1 and removed[0].startswith("rollout = ") and added == []
    assert releases.read_text(encoding="utf-8") == before


def test_promotion_makes_the_candidate_active_and_rollback_stays_one_line(
    v3: Path, rag: Rag
) -> None:
    lib = v3
    _lock(rag, lib)
    releases = lib / "releases.toml"
    # a configured plan: one stage at 100 % with no minimum
    releases.write_text(
        releases.read_text(encoding="utf-8")
        + '\n[rollout]\nstages = [{ name = "all", percent = 100, min_minutes = 0 }]\n',
        encoding="utf-8",
    )
    r = rag("prompts", "canary", PID, "v3", "--root", str(lib), "--now", T0)
    assert r.code == 0 and "all (100 % of users" in r.out, r.err
    assert build_registry(lib).choose(PID, "anyone")[1] == "candidate"
    r = rag("prompts", "canary", PID, "--promote", "--root", str(lib), "--now", T0)
    assert r.code == 1 and "no answer log read" in r.err  # evidence: the log of the stage
    state = releases.read_text(encoding="utf-8")
    edit(releases, "min_minutes = 0 }", "min_minutes = 0, min_answers = 0 }")
    log = lib.parent / "empty.jsonl"
    log.write_text(
        json.dumps({"event": "answer", "trace_id": "t", "ts": T0, "model": "m", "mode": "strict",
                    "question": "q"}) + "\n",
        encoding="utf-8",
    )  # fmt: skip
    r = rag(
        "prompts", "canary", PID, "--promote", "--root", str(lib), "--now", T0, "--log", str(log)
    )
    assert r.code == 0 and "v3 is active; v2 is the fallback" in r.out, (r.out, r.err)
    after = releases.read_text(encoding="utf-8")
    rel = build_registry(lib).release(PID)
    assert rel is not None and (rel.active, rel.fallback, rel.rollout) == (3, 2, None)
    assert "rollout = " not in after and state != after
    r = rag("prompts", "rollback", PID, "--root", str(lib))
    removed, added = _diff(after, releases.read_text(encoding="utf-8"))
    assert r.code == 0 and removed == ['active = "v3"'] and added == ['active = "v2"']


def test_check_flags_a_rollout_line_that_does_not_match_its_stage(v3: Path, rag: Rag) -> None:
    _lock(rag, v3)
    releases = v3 / "releases.toml"
    edit(
        releases,
        'fallback = "v1"\n',
        'fallback = "v1"\nrollout = { candidate = "v3", stage = "canary", percent = 5, '
        'since = "2026-12-04T00:00:00Z" }\n',
    )
    line = (
        releases.read_text(encoding="utf-8")
        .splitlines()
        .index(
            next(
                x
                for x in releases.read_text(encoding="utf-8").splitlines()
                if x.startswith("rollout")
            )
        )
        + 1
    )
    found = [(v.code, v.line) for v in build_registry(v3).check()]
    assert found == [("P030", line)]
    edit(releases, 'candidate = "v3"', 'candidate = "v7"')
    messages = [v.message for v in build_registry(v3).check() if v.code == "P030"]
    assert any("system/kb_qa_v7 has no loadable module" in m for m in messages), messages


def test_a_day_of_logged_traffic_at_1_percent(
    v3: Path, rag: Rag, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A replayed day: 1 % ± 0.2 % of users get the candidate, each user always the same arm;
    at 10 % the 1 % stay in; a pin wins over the rollout."""
    _lock(rag, v3)
    day = simulate_traffic.build(
        simulate_traffic._args(["--users", "20000", "--seed", "7", "--root", str(v3)])
    )
    answers = [r for r in day if r["event"] == "answer"]
    assert not any(r["arms"] for r in answers)  # logged before any rollout
    releases = v3 / "releases.toml"
    releases.write_text(
        releases.read_text(encoding="utf-8") + "\n[rollout]\nstages = [\n"
        '  { name = "canary", percent = 1, min_minutes = 30 },\n'
        '  { name = "small", percent = 10, min_minutes = 120 },\n'
        '  { name = "full", percent = 100, min_minutes = 1440 },\n]\n',
        encoding="utf-8",
    )
    r = rag("prompts", "canary", PID, "v3", "--percent", "1", "--root", str(v3), "--now", T0)
    assert r.code == 0, r.err
    reg = build_registry(v3)

    def replay(registry: Any) -> dict[str, set[str]]:
        seen: dict[str, set[str]] = {}
        for rec in answers:
            spec, arm = registry.choose(PID, rec["user"])
            assert (arm == "candidate") == (spec.version == 3)
            seen.setdefault(str(rec["user"]), set()).add(arm)
        return seen

    seen = replay(reg)
    assert all(len(arms) == 1 for arms in seen.values())  # each user consistently
    share = sum("candidate" in arms for arms in seen.values()) / len(seen)
    assert len(seen) > 15_000 and 0.008 <= share <= 0.012, share
    first = {u for u, arms in seen.items() if "candidate" in arms}
    edit(releases, 'stage = "canary", percent = 1,', 'stage = "small", percent = 10,')
    seen10 = replay(build_registry(v3))
    in10 = {u for u, arms in seen10.items() if "candidate" in arms}
    assert first <= in10 and 0.09 <= len(in10) / len(seen10) <= 0.11
    # no user id: the active version; a pin: everyone on the pinned version
    assert reg.choose(PID, None) == (reg.get("system/kb_qa_v2"), "control")
    monkeypatch.setenv("RAG_PROMPT_PIN", "system/kb_qa=v1")
    assert reg.choose(PID, next(iter(first))) == (reg.get("system/kb_qa_v1"), "pinned")


def test_rollback_during_a_rollout_says_the_rollout_goes_on(v3: Path, rag: Rag) -> None:
    _lock(rag, v3)
    assert rag("prompts", "canary", PID, "v3", "--root", str(v3), "--now", T0).code == 0
    r = rag("prompts", "rollback", PID, "--root", str(v3))
    assert r.code == 0 and "the rollout of v3 goes on" in r.out and "--abort" in r.out, r.out


def test_the_rollout_page_names_a_broken_plan(v3: Path, tmp_path: Path) -> None:
    from app.view.server import Viewer

    releases = v3 / "releases.toml"
    releases.write_text(
        releases.read_text(encoding="utf-8")
        + '\n[rollout]\nstages = [{ name = "canary", percent = 5 }]\n',
        encoding="utf-8",
    )
    status, html = Viewer(tmp_path, v3, None).page("/rollout")
    assert status == 422 and "the last stage must serve 100 %" in html
