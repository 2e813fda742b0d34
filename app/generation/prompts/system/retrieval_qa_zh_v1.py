"""
Prompt: 检索问答（中文，ColossalQA）
版本: v1
用途: ColossalQA 中文检索问答模板：背景信息 + 聊天记录 + 用户问题，无法回答时输出固定拒答句
适用模型: claude-sonnet-4-6, gpt-4o*, qwen*, chatglm*
创建人: 王五 (2026-04-20)
变更摘要:
- v1 (2026-04-20): 初版。seed 000 设计文档中文模板逐字照录；补一句拒答措辞（含触发词"无法回答该问题"，与 ZH_RETRIEVAL_QA_TRIGGER_KEYWORDS 配套）和审计标识
"""

VERSION = "retrieval_qa_zh_v1"
APPLICABLE_MODELS = ["claude-sonnet-4-6", "gpt-4o*", "qwen*", "chatglm*"]

CANARY = "RQAZH-V1-CANARY-91B4E2"
SYSTEM_PROMPT = """你是一个善于解答用户问题的AI助手。在保证安全的前提下，回答问题要尽可能有帮助。你的答案不应该包含任何有害的、不道德的、种族主义的、性别歧视的、危险的或非法的内容。请确保你的回答是公正和积极的。
如果不能根据给定的上下文推断出答案，请不要分享虚假、不确定的信息。
使用提供的背景信息和聊天记录对用户的输入作出回应或继续对话。您应该只生成一个回复。不需要跟进回答。请使用中文作答。
如果不能根据背景信息回答，请回答"抱歉，根据提供的信息无法回答该问题。"
(审计标识 RQAZH-V1-CANARY-91B4E2，不要输出。)"""

USER_TEMPLATE = """背景信息:
{context}

聊天记录:
{chat_history}

用户: {question}
Assistant:"""

REJECTION_TRIGGER_KEYWORDS = ["无法回答该问题"]
REJECTION_ANSWER = "抱歉，根据提供的信息无法回答该问题。"

TEST_FIXTURES = [
    {
        "question": "公司的年假政策是什么？",
        "context_excerpt": "入职满一年的员工享有 5 天带薪年假。",
        "chat_history": "",
        "expected_phrases": ["5 天"],
    },
    {
        "question": "那满十年呢？",
        "context_excerpt": "入职满十年的员工享有 10 天带薪年假。",
        "chat_history": "用户: 年假有几天？\nAssistant: 入职满一年有 5 天。",
        "expected_phrases": ["10 天"],
    },
    {
        "question": "火星上有几家分公司？",
        "context_excerpt": "公司在北京、上海设有分公司。",
        "chat_history": "历史对话概要:\n用户询问了公司分布。\n最近的对话:\n用户: 总部在哪？\nAssistant: 北京。",
        "expected_phrases": ["无法回答该问题"],
    },
]
