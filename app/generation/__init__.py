"""Generation: the prompt registry (content in ``prompts/``, mechanism in ``registry``) and
the runtime pieces built on it. Import the parts you need; nothing heavy loads here."""
