"""Moved: the analyser lives in :mod:`app.text.analyser` (one analyser for retrieval, the
offline baselines and the judges). These names stay importable from here for now."""

from __future__ import annotations

from app.text.analyser import ensure_jieba, has_cjk, tokenize

__all__ = ["ensure_jieba", "has_cjk", "tokenize"]
