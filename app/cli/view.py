"""``rag view [DIR]``: browse the runs in DIR (default ``reports/``) in a local web viewer.

The server binds 127.0.0.1 only and serves pages rendered from the typed reports
(:mod:`app.view`); nothing is uploaded. Ctrl-C stops it.
"""

from __future__ import annotations

from pathlib import Path

import click


@click.command("view")
@click.argument("folder", required=False, type=click.Path(path_type=Path, file_okay=False))
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True,
              help="0: any free port.")  # fmt: skip
@click.option("--open/--no-open", "open_browser", default=False, help="Open a browser tab.")
@click.option("--log", "answer_log", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Answer log for /rollout (default: logs/answers.jsonl).")  # fmt: skip
@click.option("--prompts", "prompts_root", type=click.Path(path_type=Path, file_okay=False),
              default=None, help="Prompts tree for /rollout (default: the shipped one).")  # fmt: skip
def cli(
    folder: Path | None,
    port: int,
    open_browser: bool,
    answer_log: Path | None,
    prompts_root: Path | None,
) -> None:
    """Serve the runs in FOLDER (default: reports/) on http://127.0.0.1:PORT/.

    Runs list, one run (summary + filterable case table), one case (golden answer,
    retrieved chunks with ACL, judge reasoning, cost), compare two runs (delta table, then
    each case's answers side by side with a word diff), a trend over the runs, and
    /rollout: each staged rollout's stage, next step, A/B of its arms and 👎 trend per arm.
    """
    from app.paths import reports_dir
    from app.view.server import serve

    target = folder if folder is not None else reports_dir()

    def ready(url: str) -> None:
        click.echo(f"rag view: {target} on {url} (Ctrl-C stops)")
        if open_browser:
            import webbrowser

            webbrowser.open(url)

    serve(target, port, ready, prompts_root, answer_log)
