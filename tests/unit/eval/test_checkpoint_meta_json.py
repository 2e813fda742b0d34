"""checkpoint.meta_json: the process counters written with every case read back (json.loads)
exactly as json.dumps's text of them does — msgspec's faster text for plain JSON data,
json.dumps itself for anything msgspec would write differently."""

from __future__ import annotations

import datetime
import json
import math
import time
from types import SimpleNamespace
from typing import Any

import pytest

from app.eval.run.case import process_record
from app.eval.run.checkpoint import meta_json
from app.llm.engine_stats import EngineStats


def _same(value: Any) -> None:
    text = meta_json(value)
    assert _canon(json.loads(text)) == _canon(json.loads(json.dumps(value))), text


def _canon(value: Any) -> str:
    # NaN != NaN: compare the texts json.dumps gives of what was read back
    return json.dumps(value)


def _record(**stats: Any) -> dict[str, Any]:
    engine = SimpleNamespace(stats=EngineStats(**stats))
    return process_record(engine, time.monotonic() - 12.3456)


def test_a_process_record_reads_back_as_json_dumps_wrote_it() -> None:
    records = [
        _record(),
        _record(
            calls=1546,
            completions=1546,
            input_tokens=30920,
            cost_usd=0.1 + 0.2,  # a float whose shortest text has 17 digits
            by_provider={"inproc:gpt-4o-mini": 746, "openai:gpt-4o@http://127.0.0.1:9/v1": 800},
            retry_budget={"cap": None, "ratio": 0.5, "floor": 100, "requests": 1546},
            concurrency={
                "openai": {"ceiling": 16, "final": 12, "events": [{"at": 1.25e-7, "to": 12}]}
            },
        ),
        {**_record(calls=3), "worker_of": "process:ab12cd34"},
    ]
    for record in records:
        _same(record)
        text = meta_json(record)
        assert json.loads(text) == json.loads(json.dumps(record))
        assert json.loads(text)["engine"]["cost_usd"] == record["engine"]["cost_usd"]


@pytest.mark.parametrize(
    "value",
    [
        {"cost": math.nan},  # msgspec would write null
        {"cost": math.inf, "other": -math.inf},
        {1: "int key", "2": 2},  # json.dumps makes the key a string
        {True: 1, None: 2, 1.5: 3},
        {"pair": (1, 2), "nested": [(3, {"x": (4,)})]},
        {"big": 2**70, "small": -(2**70)},
        {"text": '年假 5 天 \u2028 \x00 "quoted" \\', "emoji": "🙂"},
        {"lone": "\ud800"},  # a lone surrogate: json.dumps escapes it
        {"neg0": -0.0, "tiny": 5e-324, "huge": 1.7976931348623157e308},
        [],
        "plain",
        None,
    ],
)
def test_values_msgspec_writes_differently_read_back_as_json_dumps_wrote_them(
    value: Any,
) -> None:
    _same(value)


def test_what_json_dumps_refuses_is_still_refused() -> None:
    with pytest.raises(TypeError):
        json.dumps({"at": datetime.datetime(2026, 12, 1)})
    with pytest.raises(TypeError):
        meta_json({"at": datetime.datetime(2026, 12, 1)})
