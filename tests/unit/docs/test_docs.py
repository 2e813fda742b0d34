"""The README and the docs site are a guide, not a lab notebook, and what they show exists.

- No work-log matter in README.md or any page under docs/: issue numbers ("issue 14",
  "#123"), clock times in UTC or ISO date-times, load averages, commit hashes.
- Every `rag …` command shown in a code block or an inline code span names a real command
  path: ``rag <path> --help`` exits 0.
- Every page under docs/ is in the nav of mkdocs.yml, and the README stays short.

The detectors are tested on planted lines first, so a clean result means something.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
import yaml
from click.testing import CliRunner

from app.cli import cli

ROOT = Path(__file__).resolve().parents[3]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
README_MAX_LINES = 250


def doc_files() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


# --- work-log matter ---------------------------------------------------------------------

# a run of hex digits holding a digit and a letter: git's short (7-12) and full (40) forms
# (a 16-hex trace id or a 64-hex sha256 is not one)
_HEX = r"(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])(?:[0-9a-f]{7,12}|[0-9a-f]{40})"
WORK_LOG: dict[str, re.Pattern[str]] = {
    "an issue number": re.compile(
        r"\b(?:issues?|PR|pull request|wave|session|stop)\s+#?\d+\b", re.I
    ),
    "an issue reference": re.compile(r"(?:^|[\s(\[])#\d+\b"),
    "a clock time": re.compile(
        r"\b\d{1,2}:\d{2}(?::\d{2})?\s*UTC\b|\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}"
    ),
    "a load average": re.compile(r"\bload(?:\s+average)?s?\s*(?:[≈~=:]\s*)?\d", re.I),
    "a commit hash": re.compile(
        rf"`{_HEX}`|\b(?:main|commit|HEAD|sha|on|at)\s+{_HEX}\b|\b[0-9a-f]{{40}}\b"
    ),
}


# Matter a generated or quoted block may hold: "#3" in a tool's output names a chunk; the
# benchmarks page's generated block states the load average it was measured at, on purpose.
IN_CODE_OK = {"an issue reference"}


def work_log_hits(text: str) -> list[str]:
    hits = []
    in_code = False
    in_bench = False
    in_sim = False
    for line_no, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith(("```", "~~~")):
            in_code = not in_code
        if "<!-- bench:begin -->" in line:
            in_bench = True
        if "<!-- simulated-clock:begin -->" in line:
            in_sim = True
        for what, pattern in WORK_LOG.items():
            if in_code and what in IN_CODE_OK:
                continue
            if in_bench and what == "a load average":
                continue
            if in_sim and in_code and what == "a clock time":
                continue
            found = pattern.search(line)
            if found:
                hits.append(f"{line_no}: {what}: {found.group(0)!r} in {line.strip()[:120]!r}")
        if "<!-- bench:end -->" in line:
            in_bench = False
        if "<!-- simulated-clock:end -->" in line:
            in_sim = False
    return hits


@pytest.mark.parametrize(
    "line",
    [
        "Fixed in issue 14.",
        "see #123 for the discussion",
        "(#7) merged",
        "measured at 19:31 UTC",
        "run on 2026-12-01 22:51",
        "2026-12-01T22:51:57Z",
        "load average 0.6–1.2",
        "at load ≈ 8 on the shared machine",
        "main `759d9e9`",
        "measured on main 759d9e9",
        "commit 0fa2b2a fixed it",
        "b746be2c0ffee1234567890abcdef0123456789a",
    ],
)
def test_the_work_log_detector_finds_planted_matter(line: str) -> None:
    assert work_log_hits(line), line


@pytest.mark.parametrize(
    "line",
    [
        "`sample:it/devices.md#2` is the chunk an expert cites",
        "rag eval run --resume 20261130T193857Z-95d775",
        "prompt_hash sha256:579b803b76f66f697e94e91a654de8e1e50ce550cf79180512d0bc1b18c8bd63",
        "trace_id   46b6b793adff464e",
        "recorded down by u-wang on 3f1c0d2a9b7e4c11",
        "rag feedback 3f1c0d2a9b7e4c11 --user u-wang --down",
        "- cand-a0d597bdbd  [high_latency]  出差住酒店一晚最多报多少钱",
        '"annotated_at": "2026-12-01"',
        "payload 0 bytes; load_report(path)",
        "seed 004 §9",
        "## Heading",
    ],
)
def test_the_work_log_detector_leaves_ordinary_text_alone(line: str) -> None:
    assert not work_log_hits(line), line


def test_code_blocks_and_the_generated_bench_block_are_read_with_their_own_rules() -> None:
    quoted = "```console\nthis document has chunks #0 to #4: #0 年休假制度\n```\n"
    assert not work_log_hits(quoted)
    assert work_log_hits(quoted.replace("chunks #0", "chunks (issue 14) #0"))
    bench = (
        "<!-- bench:begin -->\nload average at the start 0.12 / 0.30 / 0.41\n<!-- bench:end -->\n"
    )
    assert not work_log_hits(bench)
    assert work_log_hits(bench + "measured at load 0.5")
    # a walkthrough on a simulated clock (operations.md's staged rollout) states its times in
    # its code blocks, between markers; prose there, and everything else, is still checked
    sim = "```console\n$ rag prompts canary system/kb_qa --now 2026-12-05T00:30:00Z\n```\n"
    marked = f"<!-- simulated-clock:begin -->\n{sim}<!-- simulated-clock:end -->\n"
    assert work_log_hits(sim) and not work_log_hits(marked)
    assert work_log_hits(marked.replace("```\n<!-- sim", "```\nran at 07:31 UTC\n<!-- sim"))
    assert work_log_hits(marked.replace("--now", "(issue 14) --now"))
    assert work_log_hits(marked + sim)


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_work_log_matter(path: Path) -> None:
    hits = work_log_hits(path.read_text(encoding="utf-8"))
    assert not hits, f"{path.relative_to(ROOT)}: work-log matter (say it in words):\n" + "\n".join(
        hits
    )


# --- every `rag …` shown exists ------------------------------------------------------------

_FENCE = re.compile(r"^(```|~~~)[^\n]*\n(.*?)^\1\s*$", re.S | re.M)
_INLINE = re.compile(r"`(rag [^`\n]+)`")
_PROMPT = re.compile(r"^\s*(?:\$\s+)?(?:(?:do|then|else|time)\s+)?(?:[A-Z_]+=\S+\s+)*")


def rag_lines(text: str) -> Iterator[str]:
    """Each `rag …` command line of the code blocks and inline code spans, continuation-joined."""
    for block in _FENCE.finditer(text):
        body = re.sub(r"\\\n\s*", " ", block.group(2))
        for line in body.splitlines():
            for part in re.split(r"\s*(?:&&|\|\||;|\||\$\(|`)\s*", line):
                part = _PROMPT.sub("", part, count=1)
                if re.match(r"(?:\.venv/bin/)?rag\s+[a-z]", part):
                    yield part
    prose = _FENCE.sub("", text)
    for span in _INLINE.finditer(prose):
        yield span.group(1)


def command_path(line: str) -> list[str]:
    """The sub-command names at the start of a `rag …` line (options and arguments cut)."""
    try:
        words = shlex.split(line, comments=True)
    except ValueError:
        words = line.split()
    words = words[1:]  # "rag"
    path: list[str] = []
    command: click.Command = cli
    ctx = click.Context(cli)
    while isinstance(command, click.Group) and words:
        word = words.pop(0)
        if word.startswith("-") or not re.fullmatch(r"[a-z][a-z-]*", word):
            break
        sub = command.get_command(ctx, word)
        if sub is None:
            path.append(word)  # not a command: --help on it fails, and the test says which
            break
        path.append(word)
        command = sub
    return path


def shown_commands() -> dict[tuple[str, ...], str]:
    found: dict[tuple[str, ...], str] = {}
    for path in doc_files():
        for line in rag_lines(path.read_text(encoding="utf-8")):
            found.setdefault(tuple(command_path(line)), f"{path.relative_to(ROOT)}: {line}")
    return found


def test_the_command_collector_reads_blocks_and_spans() -> None:
    text = (
        "Run `rag eval compare A B` or:\n\n```console\n$ rag prompts check --root /tmp/x\n"
        "$ RAG_LANG=zh rag datasets check \\\n    smoke_v1.1.jsonl\n"
        "$ for i in 1 2; do rag eval run --suite smoke --shard $i/2; done\n```\n"
    )
    paths = sorted(tuple(command_path(line)) for line in rag_lines(text))
    assert paths == [
        ("datasets", "check"),
        ("eval", "compare"),
        ("eval", "run"),
        ("prompts", "check"),
    ]
    assert command_path("rag eval nonsense --x") == ["eval", "nonsense"]


def test_every_rag_command_shown_exists() -> None:
    commands = shown_commands()
    assert len(commands) > 20, "the collector found almost no `rag …` command in the docs"
    runner = CliRunner()
    missing = []
    for path, where in sorted(commands.items()):
        result = runner.invoke(cli, [*path, "--help"])
        if result.exit_code != 0:
            missing.append(f"rag {' '.join(path)} --help -> {result.exit_code}  ({where})")
    assert not missing, "commands shown in the docs that the CLI does not have:\n" + "\n".join(
        missing
    )


# --- the site's shape ----------------------------------------------------------------------


def nav_pages(node: object) -> Iterator[str]:
    if isinstance(node, str):
        yield node
    elif isinstance(node, list):
        for item in node:
            yield from nav_pages(item)
    elif isinstance(node, dict):
        for value in node.values():
            yield from nav_pages(value)


def test_every_page_is_in_the_nav_and_every_nav_entry_exists() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    listed = set(nav_pages(config["nav"]))
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    assert listed - pages == set(), "nav entries without a page"
    assert pages - listed == set(), "pages missing from the nav of mkdocs.yml"


def test_the_readme_is_a_short_guide_whose_links_resolve() -> None:
    text = README.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines (at most 250)"
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    assert targets, "the README links to no page"
    broken = [t for t in targets if "://" not in t and not (ROOT / t).exists()]
    assert not broken, f"README.md links to missing files: {broken}"


def test_the_changelog_is_grouped_by_release_in_keep_a_changelog_form() -> None:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    releases = re.findall(r"^## (.+)$", text, re.M)
    assert releases and releases[0] == "[Unreleased]", "the first section is ## [Unreleased]"
    for heading in releases[1:]:
        assert re.fullmatch(r"\[\d+\.\d+\.\d+\] - \d{4}-\d{2}-\d{2}", heading), heading
    kinds = set(re.findall(r"^### (.+)$", text, re.M))
    allowed = {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}
    assert kinds <= allowed, f"sections other than Keep a Changelog's: {kinds - allowed}"
    hits = work_log_hits(text)
    assert not hits, "CHANGELOG.md: work-log matter (say it in words):\n" + "\n".join(hits)


# --- tables that restate the code ----------------------------------------------------------


def test_the_prompts_page_lists_every_violation_code_with_its_fix() -> None:
    from app.generation.registry.rules import RULES

    page = (DOCS / "prompts.md").read_text(encoding="utf-8")
    for rule in RULES.values():
        fix = rule.fix.replace("|", "\\|")
        assert f"| {rule.code} | `{rule.name}` | {fix} |" in page, (
            f"docs/prompts.md: the row of {rule.code} differs from app/generation/registry/rules.py"
        )


def test_the_metrics_page_explains_every_registered_metric_and_threshold() -> None:
    import tomllib

    from app.eval.scoring.table import specs

    page = (DOCS / "metrics.md").read_text(encoding="utf-8")
    missing = [name for name in specs() if f"| `{name}` |" not in page]
    assert not missing, f"docs/metrics.md does not explain: {missing}"
    toml = ROOT / "app" / "eval" / "scoring" / "thresholds.toml"
    defaults = tomllib.loads(toml.read_text(encoding="utf-8"))["defaults"]
    for name, bound in defaults.items():
        ((kind, value),) = bound.items()
        sign = "≥" if kind == "min" else "≤"
        shown = re.search(rf"^\| `{name}` \| ([≥≤]) ([\d.]+) \|", page, re.M)
        assert shown and (shown.group(1), float(shown.group(2))) == (sign, float(value)), (
            f"docs/metrics.md: the threshold of {name} is not {sign} {value} as in thresholds.toml"
        )
