"""
Prompt: 递归对话摘要（中文）
版本: v1
用途: 记忆模块把最早的一对对话并入已有摘要，输出一行新的摘要（历史对话概要）
适用模型: claude-sonnet-4-6, claude-haiku-4-5, gpt-4o*, qwen*, chatglm*
创建人: 王五 (2026-04-20)
变更摘要:
- v1 (2026-04-20): 初版，按 seed 000 的 _CUSTOM_SUMMARIZER_TEMPLATE_ZH（递进式摘要 + 一个人工智能的示例），变量恰好为 summary 与 new_lines
"""

VERSION = "summarize_zh_v1"
APPLICABLE_MODELS = ["claude-sonnet-4-6", "claude-haiku-4-5", "gpt-4o*", "qwen*", "chatglm*"]

SYSTEM_PROMPT = None

USER_TEMPLATE = """请递进式地总结所提供的当前对话，将当前对话的摘要内容添加到先前已有的摘要上，返回一个融合了当前对话的新的摘要。只输出一行。

例1:
已有的摘要:
人类问Assistant对人工智能的看法。人工智能认为人工智能是一种善的力量。

新的对话内容:
人类: 为什么你认为人工智能是一种好的力量?
Assistant: 因为人工智能将帮助人类充分发挥潜力。

新的摘要:
人类问Assistant对人工智能的看法。人工智能认为人工智能是一种积极的力量，因为它将帮助人类充分发挥潜力。
示例结束

已有的摘要:
{summary}

新的对话内容:
{new_lines}

新的摘要:"""

TEST_FIXTURES = [
    {
        "summary": "",
        "new_lines": "用户: 年假有几天？\nAssistant: 入职满一年有 5 天。",
        "expected_phrases": ["年假"],
    },
    {
        "summary": "用户询问了年假天数，助手回答满一年 5 天。",
        "new_lines": "用户: 满十年呢？\nAssistant: 满十年有 10 天。",
        "expected_phrases": ["10 天"],
    },
    {
        "summary": "用户询问差旅报销标准。",
        "new_lines": "用户: 酒店上限呢？\nAssistant: 一线城市 600 元/晚。",
        "expected_phrases": ["600"],
    },
]
