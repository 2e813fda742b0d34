""" "Refused" has one home (app.text.refusal): the metric, the pipeline's rejection guard,
the answer log and shadow replay give the same verdict on the same answer.

Pinned disagreements (each failed before the homes were merged):
* full-width ``Ｉ ＣＡＮＮＯＴ ＡＮＳＷＥＲ``: ``is_refusal`` said refused (NFKC), the
  pipeline's ``apply_rejection`` did not substitute (``str.casefold`` only);
* full-width ``ＣＡＮＮＯＴ ＢＥ ＤＥＴＥＲＭＩＮＥＤ`` was not "uncertain";
* a model answering the prompt's rejection answer verbatim: the harness's observation said
  refused, the answer log's record (``mode`` + ``rejected`` only) said answered.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, get_args

from app.generation.pipeline.citations import apply_rejection
from app.generation.pipeline.generator import Pipeline, PipelineConfig
from app.generation.pipeline.trace import AnswerMode
from app.generation.registry import load_registry
from app.llm.types import ChatRequest
from app.text import is_refusal, is_uncertain
from app.text.refusal import REFUSAL_MODES

if TYPE_CHECKING:
    from conftest import FakeEngine

FULL_WIDTH = "Ｉ ＣＡＮＮＯＴ ＡＮＳＷＥＲ"


def test_full_width_refusal_gets_the_same_verdict_from_metric_and_guard() -> None:
    assert is_refusal(FULL_WIDTH)
    assert apply_rejection(FULL_WIDTH, ["cannot answer"], "R") == ("R", True)
    assert apply_rejection("Ｃａｎｎｏｔ ａｎｓｗｅｒ", ["CANNOT ANSWER"], "R") == ("R", True)
    assert apply_rejection("年假五天 [1]", ["cannot answer"], "R") == ("年假五天 [1]", False)


def test_full_width_uncertainty_is_recognised() -> None:
    assert is_uncertain("ＣＡＮＮＯＴ ＢＥ ＤＥＴＥＲＭＩＮＥＤ")
    assert not is_uncertain("年假五天 [1]")


def test_refusal_modes_have_one_home_and_are_answer_modes() -> None:
    from app.eval.run import observe
    from app.ops import logs, shadow

    assert set(REFUSAL_MODES) <= set(get_args(AnswerMode))
    for module in (observe, logs, shadow):
        assert getattr(module, "REFUSAL_MODES", REFUSAL_MODES) is REFUSAL_MODES, module


async def test_a_verbatim_rejection_answer_is_refused_in_the_log_and_the_harness(
    kb_path: Path, make_engine: type[FakeEngine], tmp_path: Path
) -> None:
    from app.eval.run.observe import observation_from_answer
    from app.ops.logs import read_answer_log

    rejection = load_registry().get("system/kb_qa_v2").rejection_answer
    assert isinstance(rejection, str) and rejection

    def reply(request: ChatRequest) -> str:
        if request.purpose == "rewrite":
            return '{"original": "q", "rewritten": "年假可以结转吗"}'
        return rejection

    config = PipelineConfig(model="anthropic:claude-sonnet-4-6", kb_path=kb_path, retriever="bm25")
    answer = await Pipeline(config, make_engine(reply)).answer(  # type: ignore[arg-type]
        "年假可以结转吗", [], ["public"]
    )
    assert answer.trace.mode in ("strict", "assisted")  # answered by the model, not a mode
    assert observation_from_answer(answer, rejection).refused
    record = read_answer_log(tmp_path / "logs" / "answers.jsonl").answers[-1]
    assert record.refused  # the log's reader (mining, shadow) agrees with the harness
    assert answer.refused
