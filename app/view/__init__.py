"""The run viewer: ``rag view`` (a local server on 127.0.0.1) and the static pages of
``rag report html`` / ``rag eval compare --format html``, drawn from typed reports.

::

    model    runs in a folder, case rows, compare rows, one case's view (golden answer, ACL)
    diff     a word-level diff of two answers (jieba for Chinese)
    pages    the Jinja2 pages (templates/, static/ inlined)
    trend    metric means with the runs' 95 % CI over a folder, by prompt version
    server   the http.server routes
    export   the same pages as files
"""
