"""
Prompt: Disambiguation (English, ColossalQA)
Version: v1
Purpose: zero-shot reference resolution: replace ambiguous references with names from the chat history; one output line
Models: meta-llama/llama-2-*-chat-hf, llama-2-*-chat*, claude-sonnet-4-6, gpt-4o*
Author: Wang Wu (2026-04-20)
Changes:
- v1 (2026-04-20): first version, after seed 000's PROMPT_DISAMBIGUATE_EN (the Mike example, answer on the "disambiguated sentence:" line); the Llama 2 markers come from the llama2 chat format
"""

VERSION = "disambiguate_en_v1"
APPLICABLE_MODELS = [
    "meta-llama/llama-2-*-chat-hf",
    "llama-2-*-chat*",
    "claude-sonnet-4-6",
    "gpt-4o*",
]

SYSTEM_PROMPT = (
    """You are a helpful, respectful and honest assistant. You always follow the instruction."""
)

USER_TEMPLATE = """Please replace any ambiguous references in the given sentence with the specific names or entities mentioned in the chat history or just output the original sentence if no chat history is provided or if the sentence doesn't contain ambiguous references. Your output should be the disambiguated sentence itself (in the same line as "disambiguated sentence:") and contain nothing else.

Here is an example:
Chat history:
Human: I have a friend, Mike. Do you know him?
Assistant: Yes, I know a person named Mike

sentence: What's his favorite food?
disambiguated sentence: What's Mike's favorite food?

Chat history:
{chat_history}

sentence: {input}
disambiguated sentence:"""

TEST_FIXTURES = [
    {
        "chat_history": "Human: Alice leads our finance team.\nAssistant: Noted.",
        "input": "Which expenses does she approve?",
        "expected_phrases": ["Alice"],
    },
    {
        "chat_history": "",
        "input": "How many days of annual leave do I get?",
        "expected_phrases": ["annual leave"],
    },
    {
        "chat_history": "Human: We use Slack at work.\nAssistant: Understood.",
        "input": "Does it support video calls?",
        "expected_phrases": ["Slack"],
    },
]
