"""The words of ``rag datasets check``, in English and Chinese (``--lang zh|en``).

Every message the checker prints is a key here with an English and a Chinese template;
:func:`say` fills one in. The language is ``--lang``, else ``$RAG_LANG``, else the locale
(``LC_ALL`` / ``LC_MESSAGES`` / ``LANG`` starting with ``zh``), else English.
"""

from __future__ import annotations

import os
import re
from typing import Literal

Lang = Literal["en", "zh"]

__all__ = ["FIELD_HINTS", "PUNCTUATION", "Lang", "resolve_lang", "say"]


def resolve_lang(lang: str | None = None) -> Lang:
    """``lang`` if given, else ``$RAG_LANG``, else the locale; ``zh`` or ``en``."""
    for value in (
        lang,
        os.environ.get("RAG_LANG"),
        os.environ.get("LC_ALL"),
        os.environ.get("LC_MESSAGES"),
        os.environ.get("LANG"),
    ):
        if value:
            return "zh" if value.lower().startswith("zh") else "en"
    return "en"


# Characters that look like JSON punctuation but are not: (English name, Chinese name, the
# ASCII character JSON needs).
PUNCTUATION: dict[str, tuple[str, str, str]] = {
    "，": ("a full-width comma", "中文逗号", ","),
    "、": ("an enumeration comma", "中文顿号", ","),
    "：": ("a full-width colon", "中文冒号", ":"),
    "；": ("a full-width semicolon", "中文分号", ","),
    "“": ("a smart (curly) quote", "中文引号（弯引号）", '"'),
    "”": ("a smart (curly) quote", "中文引号（弯引号）", '"'),
    "‘": ("a smart (curly) single quote", "中文单引号（弯引号）", '"'),
    "’": ("a smart (curly) single quote", "中文单引号（弯引号）", '"'),
    "「": ("a corner bracket", "直角引号", '"'),
    "」": ("a corner bracket", "直角引号", '"'),
    "『": ("a corner bracket", "直角引号", '"'),
    "』": ("a corner bracket", "直角引号", '"'),
    "｛": ("a full-width brace", "全角花括号", "{"),
    "｝": ("a full-width brace", "全角花括号", "}"),
    "［": ("a full-width bracket", "全角方括号", "["),
    "］": ("a full-width bracket", "全角方括号", "]"),
    "【": ("a Chinese square bracket", "中文方括号", "["),
    "】": ("a Chinese square bracket", "中文方括号", "]"),
    "\u3000": ("a full-width space", "全角空格", " "),
    "\ufeff": (
        "an invisible byte-order mark (BOM, U+FEFF)",
        "看不见的字节顺序标记（BOM，U+FEFF）",
        "",
    ),
    "\u200b": ("an invisible zero-width space (U+200B)", "看不见的零宽空格（U+200B）", ""),
}

FIELD_HINTS: dict[str, tuple[str, str]] = {
    "id": (
        'a short unique name such as "full-042" (letters, digits, "-", "_", ".")',
        '简短且唯一的名字，例如 "full-042"（字母、数字、"-"、"_"、"."）',
    ),
    "question": ("the user's question as text", "用户的问题（文本）"),
    "history": (
        'a list of turns like [{"role": "user", "content": "…"}, {"role": "assistant", "content": "…"}]',
        '由对话轮组成的列表，例如 [{"role": "user", "content": "…"}, {"role": "assistant", "content": "…"}]',
    ),
    "golden_answer": ("the answer a person would accept, as text", "人能接受的标准答案（文本）"),
    "golden_rewrite": (
        "the stand-alone question the rewrite step should produce, as text",
        "改写步骤应当得到的独立问题（文本）",
    ),
    "golden_chunk_ids": (
        'a list of chunk ids like ["sample:hr/onboarding.md#1"]',
        '片段 id 的列表，例如 ["sample:hr/onboarding.md#1"]',
    ),
    "acceptable_chunk_ids": (
        'a list of chunk ids like ["sample:hr/onboarding.md#1"]',
        '片段 id 的列表，例如 ["sample:hr/onboarding.md#1"]',
    ),
    "anchors": (
        "where each labelled chunk's passage is, written by `rag datasets anchor` — "
        '{"<chunk id>": {"heading": [...], "quote": "…", "chars": 96, "sha256": "<16 hex>"}}',
        "每个标注片段所指段落的位置，由 `rag datasets anchor` 写入——"
        '{"<片段 id>": {"heading": [...], "quote": "…", "chars": 96, "sha256": "<16 位十六进制>"}}',
    ),
    "must_include": (
        'a list of words, e.g. ["身份证", "体检报告"]',
        '词语列表，例如 ["身份证", "体检报告"]',
    ),
    "must_not_include": ('a list of words, e.g. ["15000"]', '词语列表，例如 ["15000"]'),
    "acl": (
        'a list of groups, e.g. ["employee"] (groups: public, employee, hr, finance, exec)',
        '用户组列表，例如 ["employee"]（可选：public, employee, hr, finance, exec）',
    ),
    "expected_refusal": ("true or false (no quotes)", "true 或 false（不加引号）"),
    "tags": (
        'a list of lower-case tags, e.g. ["hr", "onboarding"]',
        '小写标签列表，例如 ["hr", "onboarding"]',
    ),
    "difficulty": ('"easy", "medium" or "hard"', '"easy"、"medium" 或 "hard"'),
    "annotator": ('the annotator\'s user name, e.g. "zhangsan"', '标注人的用户名，例如 "zhangsan"'),
    "annotated_at": (
        'a date written "YYYY-MM-DD", e.g. "2026-04-01"',
        '日期，格式 "YYYY-MM-DD"，例如 "2026-04-01"',
    ),
    "reviewed_by": ('the reviewer\'s user name, e.g. "lisi"', '审核人的用户名，例如 "lisi"'),
    "version": ("a whole number from 1 (no quotes)", "从 1 开始的整数（不加引号）"),
    "role": ('"user" or "assistant"', '"user" 或 "assistant"'),
    "content": ("the text of the turn", "这一轮的文本"),
}

_TEXTS: dict[str, tuple[str, str]] = {
    # layout
    "sep": (" — ", "——"),
    "capped": (
        "{file}: {n} more {field}{code} problem(s) like these, lines {first}–{last}, not shown "
        "(--json lists every one)",
        "{file}：同类问题（{field}{code}）还有 {n} 个，第 {first}–{last} 行，未逐条显示"
        "（--json 列出全部）",
    ),
    "warning": ("warning: ", "警告："),
    "summary": (
        "checked {files} file(s), {cases} case(s): {errors} error(s), {warnings} warning(s)",
        "检查了 {files} 个文件、{cases} 个用例：{errors} 个错误，{warnings} 个警告",
    ),
    # files
    "not-found": ("file or folder not found", "找不到文件或文件夹"),
    "not-found.fix": (
        "check the path (datasets live in tests/eval/datasets/)",
        "请检查路径（数据集在 tests/eval/datasets/ 下）",
    ),
    "unreadable": ("cannot be read ({why})", "无法读取（{why}）"),
    "unreadable.fix": ("check the file's permissions", "请检查文件权限"),
    "file-name": (
        "file name {name} does not follow <name>_v<major>.<minor>.jsonl",
        "文件名 {name} 不符合 <名称>_v<主版本>.<次版本>.jsonl",
    ),
    "file-name.fix": (
        "rename it, e.g. smoke_v1.0.jsonl (lower-case name, then _v, then two numbers)",
        "请改名，例如 smoke_v1.0.jsonl（小写名称，接 _v，再接两个数字）",
    ),
    "empty-file": ("the file is empty", "文件是空的"),
    "empty-file.fix": (
        "add at least one case, one JSON object per line",
        "至少写一个用例，每行一个 JSON 对象",
    ),
    "no-files": ("no dataset file to check", "没有可检查的数据集文件"),
    "no-files.fix": ("point at *.jsonl files", "请指向 *.jsonl 文件"),
    "line-too-long": (
        "the line is {size:,} bytes, over the limit of {cap:,}",
        "这一行有 {size:,} 字节，超过了上限 {cap:,}",
    ),
    "line-too-long.fix": (
        "shorten the case's texts (limits: docs/limits.md); the line was not checked",
        "请缩短用例里的文本（上限见 docs/limits.md）；这一行没有检查",
    ),
    "bom": (
        "the file starts with a byte-order mark (BOM, U+FEFF)",
        "文件开头有字节顺序标记（BOM，U+FEFF）",
    ),
    "bom.fix": (
        "tolerated; to remove it save the file as 'UTF-8' (not 'UTF-8 with BOM')",
        "可以容忍；要去掉它，请把文件另存为“UTF-8”（不要选“带 BOM 的 UTF-8”）",
    ),
    "crlf": ("Windows line ends (CRLF) from here on", "从这里开始是 Windows 换行符（CRLF）"),
    "crlf.fix": (
        "tolerated; set your editor to 'LF' line ends to keep diffs clean",
        "可以容忍；请把编辑器的换行符设为“LF”，差异才清楚",
    ),
    "not-utf8": (
        "not UTF-8 text (bad byte at column {col})",
        "不是 UTF-8 文本（第 {col} 个字节无法识别）",
    ),
    "not-utf8.fix": (
        "re-save the file with the encoding 'UTF-8'",
        "请用“UTF-8”编码重新保存文件（另存为 → 编码选 UTF-8）",
    ),
    "blank-line": ("blank line(s) ignored (line {where})", "已忽略空行（第 {where} 行）"),
    "blank-line.fix": (
        "tolerated; delete empty lines so every line is one case",
        "可以容忍；请删除空行，让每一行都是一个用例",
    ),
    "kb": ("knowledge base cannot be loaded: {why}", "知识库无法加载：{why}"),
    "kb.fix": (
        "fix the document named above; chunk ids were not checked",
        "请修正上面提到的文档；片段 id 没有检查",
    ),
    # JSON
    "json": (
        "not valid JSON: {msg} at column {col}",
        "第 {line} 行第 {col} 列：不是合法的 JSON（{msg}）",
    ),
    "json.punct": (
        "line {line}, column {col}: {name} `{char}`; JSON needs {need}",
        "第 {line} 行第 {col} 列：使用了{name} `{char}`，JSON 需要{need}",
    ),
    "json.punct.need": ("the ASCII `{ascii}`", "英文{kind} `{ascii}`"),
    "json.invisible": (
        "line {line}, column {col}: {name} inside the file",
        "第 {line} 行第 {col} 列：文件中间有{name}",
    ),
    "json.punct.fix": (
        "replace it (switch the input method to English punctuation while typing JSON)",
        "请改成英文标点（写 JSON 时把输入法切换到英文标点）",
    ),
    "json.punct.invisible.fix": (
        "delete the invisible character (it often comes from pasting text saved 'with BOM')",
        "请删除这个看不见的字符（常见于粘贴了“带 BOM”保存的文本）",
    ),
    "json.other": ("not valid JSON: {msg}", "不是合法的 JSON：{msg}"),
    "json.other.fix": (
        "use plain JSON: texts in double quotes, numbers, true/false, lists and objects",
        "请只用普通 JSON：双引号文本、数字、true/false、列表和对象",
    ),
    "json.generic.fix": ("fix the JSON syntax at that column", "请修正该列的 JSON 语法"),
    "Expecting property name": (
        'put every field name in double quotes and remove a comma before "}"',
        '每个字段名都要加英文双引号，并删掉 "}" 前多余的逗号',
    ),
    "Expecting ',' delimiter": (
        'add the missing comma between two fields, or close a text with "',
        '在两个字段之间补上英文逗号 ","，或者用 " 把文本结束',
    ),
    "Expecting ':' delimiter": (
        'write a colon between a field name and its value: "field": value',
        '字段名和值之间要写英文冒号：“"字段": 值”',
    ),
    "Unterminated string": (
        'close the text with a double quote "',
        '请用英文双引号 " 结束这段文本',
    ),
    "Invalid control character": (
        r"a line break or tab inside a text: write it as \n or \t",
        r"文本里有换行或制表符：请写成 \n 或 \t",
    ),
    "Invalid \\escape": (
        r"a backslash inside a text: write it as \\ (two backslashes)",
        r"文本里有反斜杠：请写成 \\（两个反斜杠）",
    ),
    "Extra data": (
        "one case per line: remove the extra text after the closing }, or split the line",
        "每行只能有一个用例：删掉结尾 } 之后多出的内容，或者拆成两行",
    ),
    "Expecting value": (
        "a value is missing, or a text is not in double quotes (use \"…\", not 「…」 or '…')",
        "缺少一个值，或者文本没有用英文双引号（请用 \"…\"，不要用 「…」 或 '…'）",
    ),
    "not-object": ("the line is {what}, not one case", "这一行是{what}，不是一个用例"),
    "not-object.fix": (
        'write one case per line as an object: {"id": "…", "question": "…", …}',
        '每行写一个对象形式的用例：{"id": "…", "question": "…", …}',
    ),
    "duplicate-field": ("this field is given twice on the line", "这个字段在同一行出现了两次"),
    "duplicate-field.fix": (
        "keep only one of them (the last one would win silently)",
        "只保留一个（否则后一个会悄悄覆盖前一个）",
    ),
    # fields
    "missing-field": ("required field is missing", "缺少必填字段"),
    "missing-field.fix": ("add it: {hint}", "请补上：{hint}"),
    "unknown-field": ('unknown field "{name}"', '未知字段 "{name}"'),
    "unknown-field.close": ("did you mean '{close}'? Rename it", "是不是想写 '{close}'？请改名"),
    "unknown-field.remove": (
        "remove it; the fields are: {known}",
        "请删除；可用的字段有：{known}",
    ),
    "wrong-type": (
        "is {actual} ({value}) but must be {expected}",
        "是{actual}（{value}），但应该是{expected}",
    ),
    "wrong-type.fix": ("write it as {hint}", "请写成{hint}"),
    "null": ("is null", "是 null"),
    "null.fix": (
        "leave the field out instead of writing null",
        "不需要时请直接删掉这个字段，不要写 null",
    ),
    "not-one-of": ("{value} is not one of {allowed}", "{value} 不是可选值 {allowed} 之一"),
    "not-one-of.close": ("did you mean '{close}'?", "是不是想写 '{close}'？"),
    "not-one-of.fix": ("use {hint}", "请使用 {hint}"),
    "empty-text": ("is empty", "是空的"),
    "empty-text.fix": (
        "write the text, or leave the optional field out",
        "请填写文本，或者删掉这个可选字段",
    ),
    "empty-text.required.fix": (
        "write the text: this field is required",
        "请填写文本：这是必填字段",
    ),
    "bad-chunk-id": ("{value} is not a chunk id", "{value} 不是片段 id"),
    "bad-chunk-id.fix": (
        'write chunk ids as "sample:<path>#<n>", e.g. "sample:hr/onboarding.md#1"',
        '片段 id 的写法是 "sample:<路径>#<编号>"，例如 "sample:hr/onboarding.md#1"',
    ),
    "bad-id": ("{value} is not a usable id", "{value} 不能用作 id"),
    "bad-id.fix": (
        "use letters, digits, '-', '_' or '.', starting with a letter or digit, e.g. full-042",
        "请只用字母、数字、'-'、'_'、'.'，并以字母或数字开头，例如 full-042",
    ),
    "bad-tag": ("{value} is not a usable tag", "{value} 不能用作标签"),
    "bad-tag.fix": (
        "use lower-case letters, digits and '-', e.g. multi-turn",
        "请只用小写字母、数字和 '-'，例如 multi-turn",
    ),
    "bad-date": ("{value} is not a date", "{value} 不是日期"),
    "bad-date.fix": (
        'write the date as "YYYY-MM-DD", e.g. "2026-04-01"',
        '日期请写成 "YYYY-MM-DD"，例如 "2026-04-01"',
    ),
    "empty-list": ("is an empty list", "是空列表"),
    "empty-list.fix": ("list at least one item: {hint}", "至少写一项：{hint}"),
    "too-long": ("is longer than {n} characters", "超过了 {n} 个字符"),
    "too-long.fix": ("shorten it", "请缩短"),
    "too-small": ("{value} is too small", "{value} 太小"),
    "too-small.fix": ("use {hint}", "请使用{hint}"),
    "surrogate": (
        "contains a broken character (a lone surrogate such as \\ud800) that cannot be saved as UTF-8",
        "包含无法保存为 UTF-8 的残缺字符（孤立代理项，例如 \\ud800）",
    ),
    "surrogate.fix": (
        "delete the \\uD8xx–\\uDFxx escape, or write the whole character (😀, or its pair \\ud83d\\ude00)",
        "请删除这个 \\uD8xx–\\uDFxx 转义，或写出完整的字符（😀，或成对的 \\ud83d\\ude00）",
    ),
    "schema-other": ("{msg}", "{msg}"),
    "schema-other.fix": ("see case.schema.json ({hint})", "参见 case.schema.json（{hint}）"),
    # type words
    "type.string": ("a text in double quotes", "英文双引号括起来的文本"),
    "type.array": ("a list in square brackets [ … ]", "方括号 [ … ] 括起来的列表"),
    "type.object": ("an object in curly braces { … }", "花括号 { … } 括起来的对象"),
    "type.boolean": ("true or false", "true 或 false"),
    "type.integer": ("a whole number", "整数"),
    "type.bool": ("true/false", "true/false"),
    "type.text": ("a text", "文本"),
    "type.number": ("a number", "数字"),
    "type.list": ("a list", "列表"),
    "type.dict": ("an object", "对象"),
    "type.null": ("null", "null"),
    # meaning
    "duplicate-id": ("{value} is already used at {where}", "{value} 已在 {where} 用过"),
    "duplicate-id.fix": (
        "give this case a new id; ids are unique within a file and across suites",
        "请给这个用例换一个新 id；id 在同一文件内和不同套件之间都必须唯一",
    ),
    "duplicate-id.suite": (
        "{value} is already used by suite {suite} at {where}",
        "{value} 已被套件 {suite} 在 {where} 使用",
    ),
    "duplicate-id.suite.fix": (
        "give this case a new id; only a newer version of the same suite may repeat an id "
        "(it then updates that case)",
        "请换一个新 id；只有同一套件的新版本才能沿用 id（表示更新这个用例）",
    ),
    "unknown-chunk": (
        "chunk {value} does not exist in the knowledge base",
        "知识库里没有片段 {value}",
    ),
    "chunk.same-doc": (
        "this document has chunks #0 to #{last}: {listing}",
        "这个文档的片段是 #0 到 #{last}：{listing}",
    ),
    "chunk.close": ("did you mean '{close}'?", "是不是想写 '{close}'？"),
    "chunk.none": ("check the knowledge base", "请检查知识库"),
    "chunk.form": (
        'write it as "sample:<path>#<n>" with a path under tests/eval/kb/sample/',
        '请写成 "sample:<路径>#<编号>"，路径在 tests/eval/kb/sample/ 下',
    ),
    "acl": (
        "the case's acl {acl} may not read {chunk} (readable by {readers})",
        "用例的 acl {acl} 无权读取 {chunk}（只有 {readers} 可读）",
    ),
    "acl.fix": (
        "give the case an acl that includes {group}, or pick a chunk this user may read; to "
        "test a refusal set expected_refusal to true and remove the chunk",
        "请让用例的 acl 包含 {group}，或者换一个该用户可读的片段；若要测试拒答，请把 "
        "expected_refusal 设为 true 并删掉这个片段",
    ),
    "refusal-with-chunks": (
        "is true but the case lists golden_chunk_ids",
        "为 true，但用例列出了 golden_chunk_ids",
    ),
    "refusal-with-chunks.fix": (
        "a refused question has nothing to retrieve: remove golden_chunk_ids, or set "
        "expected_refusal to false",
        "应拒答的问题没有可检索的内容：请删掉 golden_chunk_ids，或把 expected_refusal 设为 false",
    ),
    "passage-gone": (
        "case {case}: the passage label {chunk} pointed at has changed or is gone from the "
        "knowledge base — was {old}; nearest now: {near}",
        "用例 {case}：标签 {chunk} 指向的段落已在知识库中改动或删除——原段落 {old}；"
        "现在最接近的片段：{near}",
    ),
    "passage-gone.fix": (
        "re-point the label (writes the next dataset version): `{command}`, or restore the "
        "passage in the knowledge base",
        "重新指向这个标签（会写出数据集的下一个版本）：`{command}`，或在知识库中恢复这段文字",
    ),
    "passage-gone.none": ("no chunk left in its document", "该文档已没有片段"),
    "anchor-unlisted": (
        "anchors has an entry for {value}, which the case does not label",
        "anchors 里有 {value} 的条目，但用例没有标注这个片段",
    ),
    "anchor-unlisted.fix": (
        "remove the entry from anchors (or add the chunk id to golden_chunk_ids)",
        "请从 anchors 删掉这一条（或把该片段 id 加入 golden_chunk_ids）",
    ),
    "no-chunks": ("an answerable case lists no golden chunks", "可回答的用例没有列出标准片段"),
    "no-chunks.fix": (
        "add the chunk id(s) that contain the answer, or set expected_refusal to true",
        "请补上包含答案的片段 id，或把 expected_refusal 设为 true",
    ),
    "keyword-not-in-chunk": (
        "{value} does not appear in the golden chunk(s)",
        "{value} 没有出现在标准片段里",
    ),
    "keyword-not-in-chunk.fix": (
        "use the exact wording of the document, or fix golden_chunk_ids",
        "请使用文档里的原文措辞，或修正 golden_chunk_ids",
    ),
    "list-item-joined": (
        "{value} looks like several items typed as one",
        "{value} 看起来是把几项写成了一项",
    ),
    "list-item-joined.fix": (
        'write each item as its own text in the list, e.g. ["24 小时", "8000"]',
        '请把每一项写成列表里单独的文本，例如 ["24 小时", "8000"]',
    ),
    "contradiction": ("{value} is also in must_include", "{value} 同时出现在 must_include 里"),
    "contradiction.fix": (
        "a word cannot be both required and forbidden; remove it from one list",
        "一个词不能既必须出现又禁止出现；请从其中一个列表删掉",
    ),
    "no-rewrite": ("a multi-turn case has no golden_rewrite", "多轮用例没有 golden_rewrite"),
    "no-rewrite.fix": (
        "add the stand-alone question the rewrite step should produce",
        "请补上改写步骤应当得到的独立问题",
    ),
    "rewrite-without-history": ("is set but the case has no history", "已填写，但用例没有 history"),
    "rewrite-without-history.fix": (
        "add the earlier turns in history, or remove golden_rewrite",
        "请在 history 里补上之前的对话，或删掉 golden_rewrite",
    ),
    # spreadsheets (rag datasets import)
    "sheet.where": ("row {row}, column {column}", "第 {row} 行，{column}"),
    "sheet.column": ("{letter} ({field})", "{letter} 列（{field}）"),
    "sheet.unknown-column": (
        "unknown field {name} in the header (the fields are: {known})",
        "表头里有未知字段 {name}（可用的字段有：{known}）",
    ),
    "sheet.two-columns": ("this field has two columns", "这个字段有两列"),
    "sheet.json-list": ("not a valid JSON list ({msg})", "不是合法的 JSON 列表（{msg}）"),
    "sheet.turn": (
        'line {n} of the cell does not start with "user:" or "assistant:"',
        '单元格第 {n} 行没有以 "user:" 或 "assistant:" 开头',
    ),
    "sheet.bool": ("{value} is not true or false", "{value} 不是 true 或 false"),
    "sheet.int": ("{value} is not a whole number", "{value} 不是整数"),
    "sheet.errors": ("{n} error(s): nothing written", "{n} 个错误：没有写入任何文件"),
    "sheet.warnings": (
        "{n} warning(s): read them before you commit the file",
        "{n} 个警告：提交文件之前请看一看",
    ),
    "sheet.identical": (
        "{n} cases, identical to {name}: nothing written",
        "{n} 个用例，与 {name} 完全相同：没有写入",
    ),
    "sheet.exported": (
        "wrote {target} ({n} cases of {suite} v{version})",
        "已写入 {target}（{suite} v{version} 的 {n} 个用例）",
    ),
    "sheet.exists": (
        "{target}: already exists — give another --out",
        "{target}：文件已存在——请用 --out 换一个文件名",
    ),
    "sheet.raised": (
        "version raised for the changed case(s): {ids}",
        "以下用例内容有改动，version 已自动加 1：{ids}",
    ),
    "sheet.wrote": ("wrote {target} ({n} cases)", "已写入 {target}（{n} 个用例）"),
    "note-needed": (
        "write what changed and why in the note field (it goes into the CHANGELOG); "
        "nothing was saved",
        "请在说明栏写明改了什么、为什么（会写进 CHANGELOG）；没有保存",
    ),
    "conflict.suite": (
        "{name} changed on disk since the page loaded it — your edits are still in the page; "
        "reload the suite in another tab, merge, then save",
        "页面打开之后 {name} 在磁盘上被改过——你的修改还在页面里；请在另一个标签页重新打开这个用例集，"
        "合并之后再保存",
    ),
    "conflict.review": (
        "{name} changed on disk since the page loaded it — your review is still in the page; "
        "reload the file in another tab, merge, then {then}",
        "页面打开之后 {name} 在磁盘上被改过——你的审阅还在页面里；请在另一个标签页重新打开这个文件，"
        "合并之后再操作",
    ),
    "no-candidate": ("no candidate to accept", "没有可以采纳的候选用例"),
    "candidates-mismatch": (
        "the page's candidates do not match the file — reload it",
        "页面上的候选用例和文件对不上——请重新打开",
    ),
    "reject-why": (
        "say why it is rejected (the note field)",
        "请在说明栏写明拒绝的原因",
    ),
    # the editor's expert (commits in their name)
    "expert.bad-name": (
        "write your name (no line breaks, no < or >)",
        "请填写姓名（不能换行，不能有 < 或 >）",
    ),
    "expert.bad-email": (
        "write an email address such as zhangsan@example.com",
        "请填写邮箱地址，例如 zhangsan@example.com",
    ),
    # git rules
    "changelog": (
        "dataset file(s) changed since {rev} ({names}) but CHANGELOG.md did not",
        "自 {rev} 以来数据集文件（{names}）有改动，但 CHANGELOG.md 没有",
    ),
    "changelog.fix": (
        "add an entry: which file, which version, what changed and why",
        "请补一条记录：哪个文件、哪个版本、改了什么、为什么",
    ),
    "changelog.entry": (
        "has no entry for {file} (a heading naming `{title}`)",
        "没有 {file} 的记录（需要一个写有 `{title}` 的标题）",
    ),
    "changelog.entry.fix": (
        "add `## {title} — YYYY-MM-DD — <who>` and say what changed and why "
        "(`rag datasets new-version` writes the stub)",
        "请加上 `## {title} — YYYY-MM-DD — <谁>` 并写明改了什么、为什么"
        "（`rag datasets new-version` 会写好模板）",
    ),
    "changelog.stub": (
        "the entry for {title} is still the stub from `rag datasets new-version`",
        "{title} 的记录还是 `rag datasets new-version` 生成的模板",
    ),
    "changelog.stub.fix": (
        "replace the placeholder line with what changed and why",
        "请把占位的那一行换成改了什么、为什么",
    ),
    "version-not-raised": (
        "case {value} changed since {rev} but its version is still {version}",
        "用例 {value} 自 {rev} 以来内容有改动，但 version 仍是 {version}",
    ),
    "version-not-raised.fix": (
        "set version to {next} (the editor raises it itself when it saves)",
        "请把 version 改为 {next}（用编辑器保存时会自动加 1）",
    ),
    "released-deleted": (
        "released dataset deleted since {rev}",
        "自 {rev} 以来删除了已发布的数据集",
    ),
    "released-deleted.fix": (
        "keep released versions; restore it with `git checkout {rev} -- {name}`",
        "已发布的版本要保留；请用 `git checkout {rev} -- {name}` 恢复",
    ),
    "released-edited": (
        "released file edited in place (it existed at {rev} with other content)",
        "已发布的文件被原地修改（它在 {rev} 时已存在，内容不同）",
    ),
    "released-edited.fix": (
        "restore it (`git checkout {rev} -- {name}`) and make the change in {minor} (cases "
        "added or fixed) or {major} (cases deleted, acl meaning changed), with a CHANGELOG entry: "
        "`rag datasets new-version {suite}` makes the copy",
        "请恢复它（`git checkout {rev} -- {name}`），把改动写进 {minor}（新增或修正用例）或 "
        "{major}（删除用例、acl 含义改变），并写 CHANGELOG 记录：`rag datasets new-version "
        "{suite}` 会复制出新文件",
    ),
}


_PLACEHOLDER = re.compile(r"\{(\w+)(?::([^{}]*))?\}")


def say(key: str, lang: Lang, /, **values: object) -> str:
    """The text ``key`` in ``lang`` with ``values`` filled in."""
    en, zh = _TEXTS[key]
    template = zh if lang == "zh" else en
    # only {name} placeholders are filled: the templates quote JSON, braces and all
    return _PLACEHOLDER.sub(
        lambda m: (
            format(values[m.group(1)], m.group(2) or "") if m.group(1) in values else m.group(0)
        ),
        template,
    )


def hint(field: str, lang: Lang) -> str:
    """What a field holds, in ``lang`` (empty for an unknown field)."""
    pair = FIELD_HINTS.get(field)
    if pair is None:
        return ""
    return pair[1] if lang == "zh" else pair[0]
