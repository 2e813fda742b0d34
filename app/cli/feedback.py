"""``rag feedback TRACE_ID --user U --down|--up``: record a user's rating of one answer.

Appends a ``"event": "feedback"`` record to the answer log (``logs/answers.jsonl``, or
``$RAG_LOG_DIR``), which ``rag datasets mine`` reads for seed 004 §8.3's 👎 rule.
"""

from __future__ import annotations

import click

from app.errors import UserError
from app.wellformed import first_invalid


@click.command("feedback")
@click.argument("trace_id")
@click.option("--user", required=True, help="Who rated the answer (a user id).")
@click.option("--up", "rating", flag_value="up", help="👍")
@click.option("--down", "rating", flag_value="down", help="👎")
@click.option("--comment", default=None)
def cli(trace_id: str, user: str, rating: str | None, comment: str | None) -> None:
    """Record 👍 (--up) or 👎 (--down) by USER on the answer with TRACE_ID."""
    from app.generation.pipeline.answer_log import record_feedback

    if rating is None:
        raise UserError("give --up (👍) or --down (👎)")
    if not trace_id.strip() or not user.strip():
        raise UserError("TRACE_ID and --user must not be empty")
    for name, value in (("TRACE_ID", trace_id), ("--user", user), ("--comment", comment or "")):
        if (at := first_invalid(value)) is not None:
            raise UserError(
                f"{name}: character {at + 1} is not valid text (bytes that are not UTF-8) "
                "— re-type it or fix the terminal's encoding"
            )
    rec = record_feedback(trace_id.strip(), user.strip(), rating, comment=comment)
    click.echo(f"recorded {rating} by {rec['user']} on {rec['trace_id']}")
