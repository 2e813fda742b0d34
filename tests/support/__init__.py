"""Test support shared across the suite: the fake LLM server and pytest fixtures."""
