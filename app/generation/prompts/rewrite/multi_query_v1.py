"""
Prompt: 多路查询改写
版本: v1
用途: 把一个问题改写成 n 个检索友好的不同问法（多路召回），每行一个
适用模型: claude-sonnet-4-6, claude-haiku-4-5, gpt-4o*, qwen2*
创建人: 钱七 (2026-05-05)
变更摘要:
- v1 (2026-05-05): 初版（seed 004 §2 multi_query；seed 003 §3.3 关键片段多路召回、§4.3 去掉"刚才/之前/提到的"等衔接词）
"""

VERSION = "multi_query_v1"
APPLICABLE_MODELS = ["claude-sonnet-4-6", "claude-haiku-4-5", "gpt-4o*", "qwen2*"]

SYSTEM_PROMPT = """你是检索查询改写助手。你只输出查询，不回答问题，不解释。"""

USER_TEMPLATE = """请把下面的用户问题改写成 {n} 个适合知识库关键词检索的简明问句。
要求：
1. 每个问句保留原问题的核心实体，不要编造原问题里没有的实体。
2. 问句之间用词尽量不同（同义词、拆分关键片段）。
3. 删除"刚才""之前""刚刚""提到的"这类时序衔接词。
4. 每行输出一个问句，不要编号，不要其他内容。

用户问题：{question}"""

DEFAULTS = {"n": "3"}

TEST_FIXTURES = [
    {"question": "差旅住宿报销上限是多少？", "expected_phrases": ["报销"]},
    {
        "question": "刚才提到的那个年假政策适用于实习生吗？",
        "n": "2",
        "expected_phrases": ["实习生"],
    },
    {"question": "VPN 客户端怎么安装？", "expected_phrases": ["VPN"]},
]
