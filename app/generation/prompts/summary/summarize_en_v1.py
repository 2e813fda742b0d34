"""
Prompt: Recursive conversation summary (English)
Version: v1
Purpose: the memory module folds the oldest turn pair into the running summary; one-line output
Models: meta-llama/llama-2-*-chat-hf, llama-2-*-chat*, claude-sonnet-4-6, claude-haiku-4-5, gpt-4o*
Author: Wang Wu (2026-04-20)
Changes:
- v1 (2026-04-20): first version, LangChain's SUMMARY_PROMPT that seed 000 says ColossalQA uses for English; variables exactly summary and new_lines
"""

VERSION = "summarize_en_v1"
APPLICABLE_MODELS = [
    "meta-llama/llama-2-*-chat-hf",
    "llama-2-*-chat*",
    "claude-sonnet-4-6",
    "claude-haiku-4-5",
    "gpt-4o*",
]

SYSTEM_PROMPT = None

USER_TEMPLATE = """Progressively summarize the lines of conversation provided, adding onto the previous summary returning a new summary.

EXAMPLE
Current summary:
The human asks what the AI thinks of artificial intelligence. The AI thinks artificial intelligence is a force for good.

New lines of conversation:
Human: Why do you think artificial intelligence is a force for good?
AI: Because artificial intelligence will help humans reach their full potential.

New summary:
The human asks what the AI thinks of artificial intelligence. The AI thinks artificial intelligence is a force for good because it will help humans reach their full potential.
END OF EXAMPLE

Current summary:
{summary}

New lines of conversation:
{new_lines}

New summary:"""

TEST_FIXTURES = [
    {
        "summary": "",
        "new_lines": "Human: How much annual leave do I get?\nAI: 5 days after one year.",
        "expected_phrases": ["annual leave"],
    },
    {
        "summary": "The human asks about annual leave; the AI says 5 days after one year.",
        "new_lines": "Human: And after ten years?\nAI: 10 days.",
        "expected_phrases": ["10 days"],
    },
    {
        "summary": "The human asks about travel expenses.",
        "new_lines": "Human: What is the hotel cap?\nAI: 600 yuan per night in tier-1 cities.",
        "expected_phrases": ["600"],
    },
]
