"""
Prompt: Judge·忠实度
版本: v1
用途: LLM-as-judge 评估候选答案每个事实陈述能否在参考资料中找到依据（1-5 分，JSON 输出）
适用模型: claude-opus-4-7, claude-sonnet-4-6, gpt-4o*
创建人: 周九 (2026-04-01)
变更摘要:
- v1 (2026-04-01): 初版，seed 004 §10.1 Judge Prompt 原文
"""

VERSION = "faithfulness_v1"
APPLICABLE_MODELS = ["claude-opus-4-7", "claude-sonnet-4-6", "gpt-4o*"]
VARIABLES = ["context", "question", "candidate"]
RESPONSE_FORMAT = "json"

SYSTEM_PROMPT = None

USER_TEMPLATE = """你是答案质量评审专家。请评估候选答案的"忠实度"——答案中的每个事实陈述是否都能在参考资料中找到依据。
<参考资料>
{context}
</参考资料>
<用户问题>
{question}
</用户问题>
<候选答案>
{candidate}
</候选答案>
评分标准（1-5 分）：
- 5 分：每个事实陈述都能在参考资料中找到精确依据，无任何推测。
- 4 分：绝大部分有依据，少量陈述属于合理推断（如同义改写）。
- 3 分：主要事实有依据，但有 1-2 处明显推测或改写偏差。
- 2 分：约一半内容缺乏依据，存在明显幻觉。
- 1 分：大部分内容凭空生成，与参考资料无关。
请按以下 JSON 格式输出，不要有任何额外文字：
{{"score": <1-5>, "reasoning": "<具体指出有依据/无依据的陈述>", "hallucinations": ["<幻觉片段>", ...]}}
"""

TEST_FIXTURES = [
    {
        "context": "[1] 一线城市酒店上限 600 元/晚。",
        "question": "一线城市酒店上限多少？",
        "candidate": "一线城市酒店上限为 600 元/晚 [1]。",
        "expected_phrases": ['"score"', "5"],
    },
    {
        "context": "[1] 一线城市酒店上限 600 元/晚。",
        "question": "一线城市酒店上限多少？",
        "candidate": "上限 800 元/晚，还可以报销早餐和洗衣费。",
        "expected_phrases": ['"hallucinations"', "800"],
    },
    {
        "context": "[1] 年假满一年 5 天。",
        "question": "年假有几天？",
        "candidate": "根据现有资料无法确定。",
        "expected_phrases": ['"reasoning"'],
    },
]
