"""Evaluation: the harness that runs golden suites through the pipeline and judges them.

The wings, lowest first (a wing imports only the wings before it)::

    config      RunConfig: everything that decides a run's results (shared by run and report)
    datasets/   the golden Case model and its loaders; ``rag datasets`` (check, versions,
                sheets, mining, the browser editor's backend)
    stats/      distributions, bootstrap intervals and the paired significance tests
    scoring/    metrics (retrieval, generation, safety), the judge table, judges,
                thresholds and judge calibration
    report/     the typed report records, writing and reading reports (whole, streamed,
                schema v1), summaries, markdown, shard merge and recorded baselines
    run/        the runner: cases → pipeline → judges → metrics → checkpoint → report,
                its worker processes and the warm cache
    compare/    two reports → the metric delta table a pull request shows

Each wing's ``__init__`` is its public face (``__all__``), imported on first use.
"""
