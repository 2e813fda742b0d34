"""rag-starter: versioned prompts, golden datasets and an evaluation harness for a RAG team."""

__version__ = "0.1.0"
