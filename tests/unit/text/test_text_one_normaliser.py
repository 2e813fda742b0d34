"""Text normalisation and keyword matching have one home (app.text.normalise,
app.text.match): no module keeps its own NFKC, ``casefold`` or ``lower()`` for comparing text.

Pinned disagreements (each failed before the homes were merged):
* mining keyed a question by ``nfkc().lower()``, the rest of the project by ``casefold``:
  ``Straße`` and ``STRASSE`` were two questions to it and one to the keyword matcher;
* a baselines file's suite header ``Ｓｍｏｋｅ ｓｅｔ`` (full-width) named no suite;
* ``rag kb chunks --search ＧＵＥＳＴ`` found nothing where the text says ``Guest``.
"""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner

from app.text import alnum_key, compact, contains, mentions

APP = Path(__file__).resolve().parents[3] / "app"


def test_mining_keys_a_question_as_the_matcher_folds_it() -> None:
    from app.eval.datasets.mining import _norm

    assert contains("STRASSE 年假", "Straße")  # the matcher: one word
    assert _norm("Straße 年假？") == _norm("STRASSE年假") == alnum_key("ｓｔｒａｓｓｅ 年假")


def test_a_full_width_suite_header_names_its_suite() -> None:
    from app.eval.report.baseline import suite_key

    assert suite_key("Ｓｍｏｋｅ ｓｅｔ") == suite_key("smoke集") == "smoke"


def test_kb_search_folds_width_and_case(tmp_path: Path) -> None:
    from app.cli.kb import cli

    doc = tmp_path / "kb" / "pub" / "wifi.md"
    doc.parent.mkdir(parents=True)
    doc.write_text(
        "---\ntitle: 办公网络\nacl: [public]\n---\n# 办公网络\n\n访客网络名称为 Guest。\n", "utf-8"
    )
    result = CliRunner().invoke(
        cli, ["chunks", "--search", "ＧＵＥＳＴ", "--kb", str(tmp_path / "kb")]
    )
    assert result.exit_code == 0, result.output
    assert "pub/wifi.md#0" in result.output


def test_shadow_compares_answers_by_width_and_space_keeping_case() -> None:
    from app.ops.shadow import _same

    assert _same("Ｇｕｅｓｔ  网络", "Guest 网络") and compact("Ｇｕｅｓｔ  网络") == "Guest 网络"
    assert not _same("guest", "Guest")
    assert mentions("Ｉ ＣＡＮＮＯＴ ＡＮＳＷＥＲ", ["cannot answer"])


def test_no_module_keeps_its_own_normaliser() -> None:
    own = re.compile(r"unicodedata\.normalize\(|\.casefold\(\)")
    found = {
        str(p.relative_to(APP.parent))
        for p in APP.rglob("*.py")
        if own.search(p.read_text(encoding="utf-8"))
    }
    # the injection detector folds homoglyphs and combining marks on top of the home's nfkc
    assert found <= {"app/text/normalise.py", "app/generation/pipeline/injection.py"}, found
