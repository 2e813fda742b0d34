"""The test suite is an edge, like the ``rag`` command and :mod:`app.eval.config`: it
registers the offline baselines (``offline:extractive``, ``offline:reference-judge``)
through the public ``register_provider`` seam before any test parses a model string."""

from __future__ import annotations

import app.baselines  # noqa: F401
