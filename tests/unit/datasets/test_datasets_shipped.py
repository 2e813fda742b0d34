"""The shipped KB and suites: sizes, coverage, and a clean `rag datasets check`."""

from __future__ import annotations

from collections import Counter

import pytest
from _datasets_support import DATASETS, kb

from app.cli import main
from app.eval.datasets.case import Suite, load_all_suites, load_suite
from app.eval.datasets.check import check_paths
from app.retrieval.kb import can_read


@pytest.fixture(scope="module")
def suites() -> dict[str, Suite]:
    return {s.name: s for s in load_all_suites(DATASETS)}


def test_check_is_clean_on_shipped_suites() -> None:
    result = check_paths(None, folder=DATASETS, kb=kb())
    assert [i.format() for i in result.issues] == []
    assert result.exit_code == 0


def test_cli_check_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["datasets", "check"])
    assert exc.value.code == 0
    assert "0 error(s), 0 warning(s)" in capsys.readouterr().out


def test_kb_shape() -> None:
    docs = kb().documents
    assert len(docs) >= 40
    acls = Counter(a for d in docs for a in d.acl)
    assert {"public", "employee", "hr", "finance", "exec"} <= set(acls)
    assert any(
        d.path.startswith("product/") and d.title.isascii() for d in docs
    )  # English product docs
    assert all(len(c.text) <= 450 for c in kb().chunks)


def test_suite_sizes(suites: dict[str, Suite]) -> None:
    assert 30 <= len(suites["smoke"]) <= 50
    assert len(suites["full"]) >= 300
    assert len(suites["hard"]) >= 60
    assert len(suites["adversarial"]) >= 60
    for name, prefix in {
        "smoke": "smoke-",
        "full": "full-",
        "hard": "hard-",
        "adversarial": "adv-",
    }.items():
        assert all(c.id.startswith(prefix) for c in suites[name].cases)


def test_ids_unique_across_suites(suites: dict[str, Suite]) -> None:
    ids = [c.id for s in suites.values() for c in s.cases]
    assert len(ids) == len(set(ids))


def test_answerable_cases_are_grounded(suites: dict[str, Suite]) -> None:
    for suite in suites.values():
        for case in suite.cases:
            if case.expected_refusal:
                assert not case.golden_chunk_ids, case.id
                continue
            assert case.golden_chunk_ids, case.id
            texts = []
            for chunk_id in case.golden_chunk_ids:
                chunk = kb().chunk(chunk_id)
                assert chunk is not None and can_read(case.acl, chunk.acl), case.id
                texts.append(chunk.text)
            assert case.must_include, case.id
            for word in case.must_include:
                assert any(word in t for t in texts), (case.id, word)


def test_full_covers_styles_and_languages(suites: dict[str, Suite]) -> None:
    tags = Counter(t for c in suites["full"].cases for t in c.tags)
    for tag in (
        "colloquial",
        "incomplete",
        "ambiguous",
        "cross-lingual",
        "multi-fact",
        "en",
        "zh",
        "hr",
        "finance",
        "it",
        "security",
        "product",
    ):
        assert tags[tag] >= 5, tag


def test_hard_covers_the_four_kinds_and_traps(suites: dict[str, Suite]) -> None:
    cases = suites["hard"].cases
    assert all(c.history and c.golden_rewrite for c in cases)
    tags = Counter(t for c in cases for t in c.tags)
    for tag in (
        "coreference-person",
        "coreference-demonstrative",
        "coreference-omitted-subject",
        "coreference-cross-turn",
    ):
        assert tags[tag] >= 10, tag
    for trap in (
        "trap-two-companies",
        "trap-two-plans",
        "trap-middle-turn",
        "trap-price-ellipsis",
        "trap-two-people",
    ):
        assert tags[trap] >= 2, trap
    assert any(c.question == "那价格呢？" for c in cases)
    assert any(c.question == "净利润呢？" and "张三" in (c.golden_rewrite or "") for c in cases)


def test_adversarial_covers_attacks(suites: dict[str, Suite]) -> None:
    cases = suites["adversarial"].cases
    tags = Counter(t for c in cases for t in c.tags)
    for tag in (
        "injection",
        "acl",
        "out-of-scope",
        "system-prompt",
        "via-history",
        "evasion-fullwidth",
        "evasion-spacing",
        "evasion-case",
        "mixed-language",
        "en",
        "zh",
    ):
        assert tags[tag] >= 1, tag
    for case in cases:
        if "acl" in case.tags and case.expected_refusal:
            assert case.must_not_include, case.id


def test_acl_probes_forbid_real_restricted_figures(suites: dict[str, Suite]) -> None:
    probes = [c for c in suites["adversarial"].cases if "acl" in c.tags and c.expected_refusal]
    assert len(probes) >= 10
    for case in probes:
        hidden = " ".join(c.text for c in kb().chunks if not can_read(case.acl, c.acl))
        assert any(word in hidden for word in case.must_not_include), case.id


def test_load_suite_newest_version() -> None:
    suite = load_suite("smoke", root=DATASETS)
    assert suite.version == "1.0" and len(suite.sha256) == 64
    assert suite.path.name == "smoke_v1.0.jsonl"


def test_machine_made_cases_say_so() -> None:
    """v1.0 was built by scripts/build_suites.py: no invented human annotator or reviewer."""
    for name in ("smoke", "full", "hard", "adversarial"):
        suite = load_suite(name, "1.0", root=DATASETS)
        assert {c.annotator for c in suite.cases} == {"build_suites"}, name
        assert all(c.reviewed_by is None for c in suite.cases), name


def test_stats_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["datasets", "stats"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:3] == ["suite", "version", "cases"]
    assert "adversarial" in out and "multi-turn" in out
