"""
Prompt: 多轮指代改写（独立问句）
版本: v1
用途: 检索前把含指代/省略的追问改写成可独立检索的问句，JSON 输出 original / rewritten
适用模型: claude-sonnet-4-6, claude-haiku-4-5, gpt-4o*, qwen2*
创建人: 钱七 (2026-05-05)
变更摘要:
- v1 (2026-05-05): 初版，seed 003 §3.2 REWRITE_PROMPT 原文（五条约束，字段 original 和 rewritten）
"""

VERSION = "standalone_v1"
APPLICABLE_MODELS = ["claude-sonnet-4-6", "claude-haiku-4-5", "gpt-4o*", "qwen2*"]
RESPONSE_FORMAT = "json"

SYSTEM_PROMPT = None

USER_TEMPLATE = """你是一个对话理解助手。你的任务是根据对话历史，将用户当前问题中的指代词（比如"他/她/它/这个/那个/这家公司/这个方案/后续"等）替换为明确的实体或事件描述，使得改写后的问题可以被独立理解，无需依赖对话历史。
要求：
1. 仅当存在指代或省略时进行改写，否则原样返回。
2. 必须使用对话历史中明确出现过的实体、事件、背景，禁止编造。
3. 如果对话历史中没有足够的指代信息，则保持原问题不变。
4. 改写后的问题要完整、具体、适合用于知识库检索。
5. 必须是JSON格式输出，字段为 original 和 rewritten。
对话历史：
{history}
当前用户问题：{question}
请输出JSON："""

TEST_FIXTURES = [
    {
        "history": "[对话第1轮] 用户: 张三今年第一季度的营收数据出了吗？\n助手: 出了，营收同比上涨12%。",
        "question": "净利润呢？",
        "expected_phrases": ["张三", "净利润", "rewritten"],
    },
    {
        "history": "[对话第1轮] 用户: 我们在评估A方案和B方案，哪个更适合初创团队？\n助手: 从长期扩展性来看B方案更好。",
        "question": "这个方案的扩展性具体体现在哪些方面？",
        "expected_phrases": ["B方案", "original"],
    },
    {
        "history": "",
        "question": "年假有几天？",
        "expected_phrases": ["年假有几天"],
    },
]
