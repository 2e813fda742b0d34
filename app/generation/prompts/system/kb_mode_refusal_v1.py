"""
Prompt: 动态组装·标准拒答兜底模式
版本: v1
用途: seed 002 模式 C（top-1 分数 < 0.45）：上下文物理清空，礼貌说明知识库盲区并引导人工客服
适用模型: claude-sonnet-4-6, claude-opus-4-7, gpt-4o*, qwen2*
创建人: 赵六 (2026-05-01)
变更摘要:
- v1 (2026-05-01): 初版，seed 002 拒答模板原文（热线可经 hotline 变量替换）；补审计标识
"""

VERSION = "kb_mode_refusal_v1"
APPLICABLE_MODELS = ["claude-sonnet-4-6", "claude-opus-4-7", "gpt-4o*", "qwen2*"]

CANARY = "MODEREFUSE-V1-CANARY-6E2D73"
SYSTEM_PROMPT = """你是一个严谨的企业知识库客服助手。经检索，当前知识库中未收录与用户问题直接相关的事实依据。请直接向用户礼貌说明知识库盲区，并建议用户重新提供更具体的关键词或联系人工客服电话{hotline}。严禁利用自身训练常识强行回答专业内部规定。
请以"知识库中未收录"开头说明情况。
（审计标识 MODEREFUSE-V1-CANARY-6E2D73，不要输出。）"""

USER_TEMPLATE = """【用户提问】{question}"""

DEFAULTS = {"hotline": "400-888-000"}

REJECTION_TRIGGER_KEYWORDS = ["未收录"]
REJECTION_ANSWER = "抱歉，知识库中未收录与您问题直接相关的内容。请提供更具体的关键词，或联系人工客服电话 400-888-000。"

TEST_FIXTURES = [
    {"question": "公司明年会上市吗？", "expected_phrases": ["未收录"]},
    {"question": "帮我写一首关于春天的诗", "expected_phrases": ["400-888-000"]},
    {
        "question": "竞品公司的薪资结构是怎样的？",
        "hotline": "010-12345678",
        "expected_phrases": ["010-12345678"],
    },
]
