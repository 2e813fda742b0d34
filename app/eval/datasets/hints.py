"""What a field is called and how it is written, in the place the expert writes it.

The same field is written three ways: as JSON in a ``.jsonl`` line, in the editor's boxes
(one item per line, check boxes, a turn per row) and in a spreadsheet cell (``a; b``,
``user: …`` lines). A hint shown in one place must match that place's format, so every hint
is looked up with its place: :func:`hint`. In Chinese a field is shown by its Chinese name
with the key beside it (:func:`label`): ``必含词（must_include）``.
"""

from __future__ import annotations

from typing import Literal

from app.eval.datasets.messages import FIELD_HINTS, Lang

__all__ = ["FIELD_NAMES_ZH", "Place", "hint", "label"]

Place = Literal["jsonl", "editor", "sheet"]

FIELD_NAMES_ZH: dict[str, str] = {
    "id": "编号",
    "question": "问题",
    "history": "多轮历史",
    "golden_answer": "标准答案",
    "golden_rewrite": "标准改写",
    "golden_chunk_ids": "标准片段",
    "acceptable_chunk_ids": "可接受片段",
    "anchors": "段落锚点",
    "golden_passages": "标准段落",
    "must_include": "必含词",
    "must_not_include": "禁用词",
    "acl": "权限组",
    "expected_refusal": "应拒答",
    "tags": "标签",
    "difficulty": "难度",
    "annotator": "标注人",
    "annotated_at": "标注日期",
    "reviewed_by": "复核人",
    "version": "用例版本",
    "role": "角色",
    "content": "内容",
}

_GROUPS = "public, employee, hr, finance, exec"

_EDITOR: dict[str, tuple[str, str]] = {
    "golden_chunk_ids": (
        "one chunk id per line — use the chunk picker below, e.g. sample:hr/onboarding.md#1",
        "每行一个片段 id——用下面的“选择片段”添加，例如 sample:hr/onboarding.md#1",
    ),
    "acceptable_chunk_ids": (
        "one chunk id per line (optional) — use the chunk picker below",
        "每行一个片段 id（可选）——用下面的“选择片段”添加",
    ),
    "must_include": (
        "words the answer must contain: one per line, or separated by commas / 、 / ; "
        "(a pasted JSON list works too), e.g. 身份证、体检报告",
        "答案必须包含的词：每行一个，或用逗号、顿号、分号分隔（也可以粘贴 JSON 列表），"
        "例如 身份证、体检报告",
    ),
    "must_not_include": (
        "words the answer must never contain: one per line, or separated by commas / 、 / ;",
        "答案绝不能出现的词：每行一个，或用逗号、顿号、分号分隔",
    ),
    "tags": (
        "lower-case tags: one per line, or separated by commas, e.g. hr, onboarding",
        "小写标签：每行一个，或用逗号分隔，例如 hr, onboarding",
    ),
    "acl": (
        "tick the groups of the simulated user (at least one)",
        "勾选模拟用户所在的用户组（至少一个）",
    ),
    "expected_refusal": (
        "tick when the assistant should refuse this question",
        "助手应当拒绝回答这个问题时勾选",
    ),
    "history": (
        "earlier turns of a multi-turn case: add a turn, pick its role, write its text",
        "多轮用例之前的对话：点“+ 加一轮”，选角色，写内容",
    ),
    "version": (
        "a whole number; a save raises it by one for every case whose content changed",
        "整数；保存时，内容有改动的用例会自动加 1",
    ),
    "difficulty": ("pick easy, medium or hard", "选择 easy、medium 或 hard"),
}

_SHEET: dict[str, tuple[str, str]] = {
    "golden_chunk_ids": (
        "chunk ids separated by ; e.g. sample:hr/onboarding.md#1; sample:hr/onboarding.md#2",
        "片段 id，用分号分隔，例如 sample:hr/onboarding.md#1; sample:hr/onboarding.md#2",
    ),
    "acceptable_chunk_ids": (
        "chunk ids separated by ; (optional)",
        "片段 id，用分号分隔（可选）",
    ),
    "must_include": (
        "words separated by ; , 、 or line breaks, e.g. 身份证; 体检报告",
        "词语，用分号、逗号、顿号或换行分隔，例如 身份证；体检报告",
    ),
    "must_not_include": (
        "words separated by ; , 、 or line breaks, e.g. 15000",
        "词语，用分号、逗号、顿号或换行分隔，例如 15000",
    ),
    "tags": (
        "lower-case tags separated by ; e.g. hr; onboarding",
        "小写标签，用分号分隔，例如 hr; onboarding",
    ),
    "acl": (
        f"groups separated by ; e.g. employee; hr (groups: {_GROUPS})",
        f"用户组，用分号分隔，例如 employee; hr（可选：{_GROUPS}）",
    ),
    "history": (
        "one turn per line, starting with user: or assistant: — e.g. user: 年假有几天？",
        "每行一轮，以 user: 或 assistant: 开头——例如 user: 年假有几天？",
    ),
    "expected_refusal": ("true or false (also 是 / 否)", "true 或 false（也可以写 是 / 否）"),
    "version": ("a whole number from 1", "从 1 开始的整数"),
    "difficulty": ("easy, medium or hard", "easy、medium 或 hard"),
    "anchors": (
        "written by `rag datasets anchor` — leave the cell as exported",
        "由 `rag datasets anchor` 写入——请保持导出时的内容",
    ),
    "golden_passages": (
        "the passage each golden chunk id points at (shown only; an import ignores it)",
        "每个标准片段 id 指向的段落（仅供查看，导入时忽略）",
    ),
}


def hint(field: str, lang: Lang, place: Place = "jsonl") -> str:
    """What ``field`` holds, written the way ``place`` takes it (empty for an unknown field)."""
    table = _EDITOR if place == "editor" else _SHEET if place == "sheet" else {}
    pair = table.get(field) or FIELD_HINTS.get(field)
    if pair is None:
        return ""
    return pair[1] if lang == "zh" else pair[0]


def label(field: str, lang: Lang) -> str:
    """How a field (or a path like ``must_include[1]``) is named: the key in English,
    ``必含词（must_include）`` in Chinese."""
    if lang != "zh" or not field:
        return field
    top = field.split("[", 1)[0].split(".", 1)[0]
    name = FIELD_NAMES_ZH.get(top)
    return f"{name}（{field}）" if name else field
