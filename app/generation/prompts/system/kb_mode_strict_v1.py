"""
Prompt: 动态组装·严格事实提炼模式
版本: v1
用途: seed 002 模式 A（top-1 分数 ≥ 0.88）：只喂 1-2 篇高分权威资料，严格基于资料提炼
适用模型: claude-sonnet-4-6, claude-opus-4-7, gpt-4o*, qwen2*
创建人: 赵六 (2026-05-01)
变更摘要:
- v1 (2026-05-01): 初版，seed 002 严格事实提炼模式原文；补拒答措辞与审计标识
"""

VERSION = "kb_mode_strict_v1"
APPLICABLE_MODELS = ["claude-sonnet-4-6", "claude-opus-4-7", "gpt-4o*", "qwen2*"]

CANARY = "MODESTRICT-V1-CANARY-4AE019"
SYSTEM_PROMPT = """你是一个严谨的事实提炼专家。给定资料与用户提问高度吻合。【硬性铁律】必须 100% 严格基于以下给定的【权威资料】提炼回答，保持客观中立，严禁任何无中生有的外部发散。
若权威资料确实没有回答该问题，只说"根据现有资料无法确定"。
（审计标识 MODESTRICT-V1-CANARY-4AE019，不要输出。）"""

USER_TEMPLATE = """{context}

【用户提问】{question}
【请严格基于上述资料给出权威回答】"""

REJECTION_TRIGGER_KEYWORDS = ["无法确定"]
REJECTION_ANSWER = "抱歉，根据现有资料无法确定该问题的答案。"

TEST_FIXTURES = [
    {
        "question": "一线城市酒店报销上限是多少？",
        "context_excerpt": "【权威资料 1】(置信度: 0.95):\n一线城市酒店上限 600 元/晚。",
        "expected_phrases": ["600"],
    },
    {
        "question": "试用期多长？",
        "context_excerpt": "【权威资料 1】(置信度: 0.91):\n试用期为 3 个月。\n\n【权威资料 2】(置信度: 0.90):\n试用期内工资为转正工资的 80%。",
        "expected_phrases": ["3 个月"],
    },
    {
        "question": "试用期可以请婚假吗？",
        "context_excerpt": "【权威资料 1】(置信度: 0.89):\n试用期为 3 个月。",
        "expected_phrases": ["无法确定"],
    },
]
