"""The run viewer: ``rag view`` (a local server on 127.0.0.1) and the static pages of
``rag report html`` / ``rag eval compare --format html``, drawn from typed reports.

::

    model     runs in a folder, compare rows
    casedata  a run's table rows and one case's page data (LeanCase, golden answer, ACL)
    stream    a report file read case by case for the static export (lean checks)
    diff      a word-level diff of two answers (jieba for Chinese)
    pages     the Jinja2 pages (templates/, static/ inlined); the case page is drawn by
              static/case.js from the case's data, served or exported alike
    trend     metric means with the runs' 95 % CI over a folder, by prompt version
    server    the http.server routes
    export    the static export: the run page + data files, one case page for all
"""
