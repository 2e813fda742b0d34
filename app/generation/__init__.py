"""Generation: two packages with small public faces.

* :mod:`app.generation.registry` — the prompt registry (loading, checks, releases, rendering);
  its content lives in ``prompts/``.
* :mod:`app.generation.pipeline` — the RAG pipeline that renders those prompts at run time.

Import the parts you need; nothing heavy loads here.
"""
