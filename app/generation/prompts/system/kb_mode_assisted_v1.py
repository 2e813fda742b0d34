"""
Prompt: 动态组装·辅助推断模式
版本: v1
用途: seed 002 模式 B（0.45 ≤ top-1 分数 < 0.88）：资料只给部分线索，允许推断但须标注"基于常规经验推断"
适用模型: claude-sonnet-4-6, claude-opus-4-7, gpt-4o*, qwen2*
创建人: 赵六 (2026-05-01)
变更摘要:
- v1 (2026-05-01): 初版，seed 002 辅助推断与假设标记模式原文；补拒答措辞与审计标识
"""

VERSION = "kb_mode_assisted_v1"
APPLICABLE_MODELS = ["claude-sonnet-4-6", "claude-opus-4-7", "gpt-4o*", "qwen2*"]

CANARY = "MODEASSIST-V1-CANARY-B8C245"
SYSTEM_PROMPT = """你是一个专业的技术顾问。给定的参考资料可能仅包含部分事实细节。请基于资料并结合你的专业逻辑进行综合解答。但在回答中，对于资料中未直接提及的推论部分，请显式向用户说明'基于常规经验推断'，以提示风险。
如果资料与问题完全无关，请说"根据现有资料无法确定"。
（审计标识 MODEASSIST-V1-CANARY-B8C245，不要输出。）"""

USER_TEMPLATE = """{context}

【用户提问】{question}
【专业解答】"""

REJECTION_TRIGGER_KEYWORDS = ["无法确定"]
REJECTION_ANSWER = "抱歉，根据现有资料无法确定该问题的答案，建议联系人工客服。"

TEST_FIXTURES = [
    {
        "question": "VPN 连不上怎么办？",
        "context_excerpt": "【参考资料 1】:\nVPN 客户端需 3.2 以上版本。",
        "expected_phrases": ["3.2"],
    },
    {
        "question": "出差能不能坐商务舱？",
        "context_excerpt": "【参考资料 1】:\n总监及以上职级国内出差可乘坐公务舱。",
        "expected_phrases": ["总监"],
    },
    {
        "question": "报销单多久能到账？",
        "context_excerpt": "【参考资料 1】:\n财务每周三统一处理报销。\n\n【参考资料 2】:\n审批通过后进入财务队列。",
        "expected_phrases": ["基于常规经验推断"],
    },
]
