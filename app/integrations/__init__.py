"""Integrations with outside services: :mod:`.langfuse` (a report uploaded as a Langfuse
dataset run).
"""
