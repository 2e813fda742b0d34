"""
Prompt: 消歧（中文，ColossalQA）
版本: v1
用途: 零样本指代消解：用聊天记录里的具体名称替换句子中的模糊指代，只输出一行消歧后的句子
适用模型: claude-sonnet-4-6, gpt-4o*, qwen*, chatglm*
创建人: 王五 (2026-04-20)
变更摘要:
- v1 (2026-04-20): 初版，按 seed 000 的 PROMPT_DISAMBIGUATE_ZH 结构（张三单例示范，与"消除歧义的句子："同一行输出）
"""

VERSION = "disambiguate_zh_v1"
APPLICABLE_MODELS = ["claude-sonnet-4-6", "gpt-4o*", "qwen*", "chatglm*"]

SYSTEM_PROMPT = """你是一个乐于助人、恭敬而诚实的助手。你总是按照指示行事。"""

USER_TEMPLATE = """请用聊天记录中提到的具体名称或实体名称替换给定句子中的任何模糊或有歧义的指代，如果没有提供聊天记录或句子中不包含模糊或有歧义的指代，则只输出原始句子。您的输出应该是消除歧义的句子本身（与"消除歧义的句子："在同一行中），并且不包含其他任何内容。

下面是一个例子：
聊天记录：
用户：我有一个朋友，张三。你认识他吗？
Assistant：我认识一个名为张三的人

句子：他最喜欢的食物是什么？
消除歧义的句子：张三最喜欢的食物是什么？

聊天记录：
{chat_history}

句子：{input}
消除歧义的句子："""

TEST_FIXTURES = [
    {
        "chat_history": "用户：李四是我们的财务总监。\nAssistant：好的，我记住了。",
        "input": "他负责审批哪些费用？",
        "expected_phrases": ["李四"],
    },
    {
        "chat_history": "",
        "input": "年假有几天？",
        "expected_phrases": ["年假有几天"],
    },
    {
        "chat_history": "用户：我们在用飞书。\nAssistant：明白。",
        "input": "它支持视频会议吗？",
        "expected_phrases": ["飞书"],
    },
]
