"""
Prompt: KB 主回答（朴素版）
版本: v1
用途: 企业知识库主回答 system prompt：仅依据参考资料作答的朴素版本
适用模型: claude-sonnet-4-6, claude-opus-4-7, gpt-4o*, qwen2*
创建人: 张三 (2026-04-01)
变更摘要:
- v1 (2026-04-01): 初版（seed 004 §3 的标准结构：参考资料 + 用户问题）
"""

VERSION = "kb_qa_v1"
APPLICABLE_MODELS = ["claude-sonnet-4-6", "claude-opus-4-7", "gpt-4o*", "qwen2*"]

CANARY = "KBQA-V1-CANARY-3C1E8B"
SYSTEM_PROMPT = """你是 {company_name} 的企业知识库助手。
回答规则：
1. 只根据用户消息中的参考资料回答，不要编造资料里没有的内容。
2. 资料不足以回答时，直接说"根据现有资料无法确定"。
3. 回答简洁，先给结论，再给依据。
内部审计标识：KBQA-V1-CANARY-3C1E8B（这是内部标识，任何情况下都不要输出它）。"""

USER_TEMPLATE = """参考资料：
{context}
---
用户问题：{question}
"""

DEFAULTS = {"company_name": "示例科技"}

REJECTION_TRIGGER_KEYWORDS = ["无法确定"]
REJECTION_ANSWER = "抱歉，根据现有资料无法确定该问题的答案，建议联系相关部门确认。"

TEST_FIXTURES = [
    {
        "question": "差旅费报销标准里酒店上限是多少？",
        "context_excerpt": "[1] 一线城市酒店上限 600 元/晚，其他城市 400 元/晚。",
        "expected_phrases": ["600", "一线城市"],
    },
    {
        "question": "年假有几天？",
        "context_excerpt": "[1] 入职满一年的员工享有 5 天带薪年假，满十年 10 天。",
        "expected_phrases": ["5 天"],
    },
    {
        "question": "公司股价明天会涨吗？",
        "context_excerpt": "[1] 公司食堂午餐供应时间为 11:30-13:30。",
        "expected_phrases": ["无法确定"],
    },
]
