"""The loader's rules: stable codes, short names and the one-sentence fix of each.

Codes never change meaning once published; a retired rule keeps its number unused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Rule:
    code: str
    name: str
    fix: str


_RULES: tuple[Rule, ...] = (
    Rule("P000", "syntax-error", "Fix the Python syntax so the module parses."),
    Rule(
        "P001",
        "filename-version-mismatch",
        'Make VERSION equal the file name without .py (e.g. VERSION = "kb_qa_v2" in kb_qa_v2.py).',
    ),
    Rule(
        "P002",
        "header-missing",
        "Start the module with a docstring header (Prompt/版本/用途/适用模型/创建人/变更摘要).",
    ),
    Rule("P003", "header-field-missing", "Add the missing header field to the module docstring."),
    Rule(
        "P004",
        "header-version-mismatch",
        "Make the header's 版本/Version line say the version in the file name (e.g. v2).",
    ),
    Rule(
        "P005",
        "header-models-mismatch",
        "List exactly the APPLICABLE_MODELS entries on the header's 适用模型/Models line.",
    ),
    Rule(
        "P006",
        "applicable-models-empty",
        "Put at least one model id or pattern in APPLICABLE_MODELS.",
    ),
    Rule("P007", "fixture-count", "Keep 3 to 5 entries in TEST_FIXTURES."),
    Rule(
        "P008",
        "fixture-shape",
        "Make each fixture a dict giving every template variable as a string plus a non-empty expected_phrases list.",
    ),
    Rule(
        "P009",
        "variable-missing",
        "Add the placeholder the category contract requires (see app/generation/registry/contracts.py).",
    ),
    Rule(
        "P010",
        "variable-unexpected",
        "Remove the placeholder or escape literal braces as {{ and }}.",
    ),
    Rule(
        "P011",
        "refusal-keyword-missing",
        "Make the template's refusal wording contain one of REJECTION_TRIGGER_KEYWORDS.",
    ),
    Rule(
        "P012",
        "qa-constant-missing",
        "Give the QA prompt REJECTION_TRIGGER_KEYWORDS, REJECTION_ANSWER and CANARY.",
    ),
    Rule("P013", "canary-not-in-system-prompt", "Put the CANARY string inside SYSTEM_PROMPT."),
    Rule(
        "P014",
        "fallback-missing",
        'Add [prompts."<category>/<slug>"] with active and fallback to releases.toml.',
    ),
    Rule(
        "P015",
        "release-unknown-version",
        "Point releases.toml at a version whose module exists.",
    ),
    Rule(
        "P016",
        "locked-content-changed",
        "Restore the released file and put the change in a new version (rag prompts new).",
    ),
    Rule(
        "P017",
        "release-not-locked",
        "Run `rag prompts lock` to record the released version's hash.",
    ),
    Rule(
        "P018",
        "top-level-statement",
        "Keep only the docstring and constant assignments of literals at module level.",
    ),
    Rule(
        "P019",
        "bad-template",
        "Use named {placeholders} only and write literal braces as {{ and }}.",
    ),
    Rule(
        "P020",
        "constant-missing-or-wrong-type",
        "Define the constant with the documented type (see DESIGN.md 'Prompt modules').",
    ),
    Rule("P021", "bad-file-name", "Name the module <slug>_v<N>.py inside a category folder."),
    Rule(
        "P022",
        "header-line-malformed",
        "Write list items as '- vN (YYYY-MM-DD): text' or '- suite: metric=value, ... (YYYY-MM-DD)'.",
    ),
    Rule(
        "P023",
        "released-edited-in-place",
        "Revert the edit of the released version and copy it to a new version instead.",
    ),
    Rule(
        "P024",
        "moving-the-ruler",
        "Change judge/ prompts in a separate change, reviewed by someone else, from the prompts they judge.",
    ),
    Rule(
        "P025",
        "releases-file-invalid",
        'Fix releases.toml / prompts.lock so they parse and name versions like "v2".',
    ),
    Rule(
        "P026",
        "baseline-not-recorded",
        "Record the report behind the numbers with `rag eval baseline REPORT --prompt <id>`, or remove the header line. "
        "A recorded run whose candidate or judge is an offline baseline, or made with `--allow-unlisted-model`, "
        "backs no header line (`rag eval baseline` refuses it).",
    ),
    Rule(
        "P028",
        "unreadable-file",
        "Make it a regular UTF-8 text file within the size limit (docs/limits.md).",
    ),
    Rule(
        "P029",
        "change-summary-placeholder",
        "Replace the TODO line under 变更摘要 / Changes with what changed in this version and why.",
    ),
    Rule(
        "P030",
        "rollout-invalid",
        "Serve only a checked, locked version written for the active version's models, at its stage's percentage; or end the rollout with `rag prompts canary <id> --abort`.",
    ),
    Rule(
        "P027",
        "baseline-mismatch",
        "Copy the recorded numbers (reports/baselines/…) into the header, or record the report the header quotes.",
    ),
)
RULES: dict[str, Rule] = {r.code: r for r in _RULES}


@dataclass(frozen=True)
class Violation:
    code: str
    file: str  # path relative to the prompts root
    line: int | None
    message: str

    @property
    def name(self) -> str:
        return RULES[self.code].name

    @property
    def fix(self) -> str:
        return RULES[self.code].fix

    def format(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.code} {self.name}: {self.message}\n    fix: {self.fix}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "name": self.name,
            "file": self.file,
            "line": self.line,
            "message": self.message,
            "fix": self.fix,
        }
