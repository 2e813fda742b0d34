"""
Prompt: Judge·正确性
版本: v1
用途: LLM-as-judge 对照标准答案评估候选答案的正确性（1-5 分，JSON 输出）
适用模型: claude-opus-4-7, claude-sonnet-4-6, gpt-4o*
创建人: 周九 (2026-04-01)
变更摘要:
- v1 (2026-04-01): 初版，结构同 seed 004 §10.1（XML 隔离、1-5 分锚点、纯 JSON 输出）
"""

VERSION = "correctness_v1"
APPLICABLE_MODELS = ["claude-opus-4-7", "claude-sonnet-4-6", "gpt-4o*"]
VARIABLES = ["question", "golden_answer", "candidate"]
RESPONSE_FORMAT = "json"

SYSTEM_PROMPT = None

USER_TEMPLATE = """你是答案质量评审专家。请对照标准答案评估候选答案的"正确性"——候选答案的结论和关键事实是否与标准答案一致。措辞不同但意思相同视为一致。
<用户问题>
{question}
</用户问题>
<标准答案>
{golden_answer}
</标准答案>
<候选答案>
{candidate}
</候选答案>
评分标准（1-5 分）：
- 5 分：结论与全部关键事实都与标准答案一致。
- 4 分：结论一致，个别次要细节缺失或表述不精确。
- 3 分：结论大体一致，但遗漏或弄错一个关键事实。
- 2 分：结论部分错误，或多个关键事实错误。
- 1 分：结论错误或答非所问。
请按以下 JSON 格式输出，不要有任何额外文字：
{{"score": <1-5>, "reasoning": "<逐条对比关键事实>", "missing_facts": ["<遗漏或错误的关键事实>", ...]}}
"""

TEST_FIXTURES = [
    {
        "question": "新员工入职需要带什么？",
        "golden_answer": "身份证、学历证书原件和体检报告。",
        "candidate": "需要带身份证、学历证书原件以及体检报告 [1]。",
        "expected_phrases": ['"score"'],
    },
    {
        "question": "年假有几天？",
        "golden_answer": "满一年 5 天，满十年 10 天。",
        "candidate": "年假有 15 天。",
        "expected_phrases": ['"missing_facts"'],
    },
    {
        "question": "酒店上限多少？",
        "golden_answer": "一线城市 600 元/晚，其他城市 400 元/晚。",
        "candidate": "一线城市 600 元/晚。",
        "expected_phrases": ['"reasoning"'],
    },
]
