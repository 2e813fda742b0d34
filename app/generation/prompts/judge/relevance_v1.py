"""
Prompt: Judge·答案相关性
版本: v1
用途: LLM-as-judge 评估候选答案是否切题、直接回应用户问题（1-5 分，JSON 输出）
适用模型: claude-opus-4-7, claude-sonnet-4-6, gpt-4o*
创建人: 周九 (2026-04-01)
变更摘要:
- v1 (2026-04-01): 初版，结构同 seed 004 §10.1（XML 隔离、1-5 分锚点、纯 JSON 输出）
"""

VERSION = "relevance_v1"
APPLICABLE_MODELS = ["claude-opus-4-7", "claude-sonnet-4-6", "gpt-4o*"]
VARIABLES = ["question", "candidate"]
RESPONSE_FORMAT = "json"

SYSTEM_PROMPT = None

USER_TEMPLATE = """你是答案质量评审专家。请评估候选答案对用户问题的"相关性"——答案是否直接回应了问题，而不是答非所问或堆砌无关信息。不评判事实是否正确。
<用户问题>
{question}
</用户问题>
<候选答案>
{candidate}
</候选答案>
评分标准（1-5 分）：
- 5 分：完全聚焦问题，直接给出问题所问的内容。
- 4 分：回应了问题，夹带少量无关内容。
- 3 分：部分回应，遗漏问题的一部分或有较多无关内容。
- 2 分：只是擦边相关。
- 1 分：答非所问。
请按以下 JSON 格式输出，不要有任何额外文字：
{{"score": <1-5>, "reasoning": "<说明答案回应了问题的哪些部分>"}}
"""

TEST_FIXTURES = [
    {
        "question": "酒店上限多少？",
        "candidate": "一线城市酒店上限 600 元/晚 [1]。",
        "expected_phrases": ['"score"'],
    },
    {
        "question": "酒店上限多少？",
        "candidate": "公司食堂午餐供应时间为 11:30-13:30。",
        "expected_phrases": ['"reasoning"'],
    },
    {
        "question": "年假有几天？",
        "candidate": "根据现有资料无法确定。",
        "expected_phrases": ['"score"'],
    },
]
