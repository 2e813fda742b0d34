"""The one provider-family table (``app.llm.providers.families``) and who fills it.

Regression: ``rag prompts render judge/relevance --model local:smollm2`` failed with
"unknown provider" because ``local`` was registered only when ``app.llm.providers`` happened
to be imported; the families lived in two lists (the parser's and the class table).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app.errors import ConfigError
from app.llm.providers import families
from app.llm.providers.families import parse_model, parse_provider
from tests.support.registry import registered

REPO = Path(__file__).resolve().parents[3]


def _python(code: str) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter: nothing imported that the code does not import."""
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60
    )


def test_rag_prompts_render_takes_a_local_model() -> None:
    """The reported command, in its own process (a test process has imported everything)."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "app",
            "prompts",
            "render",
            "judge/relevance",
            "--model",
            "local:smollm2",
            "--allow-unlisted-model",  # smollm2 is not in the judge's APPLICABLE_MODELS
            "--var",
            "question=q",
            "--var",
            "candidate=c",
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["provider"] == "local:smollm2"
    assert out["request"]["model"] == "smollm2"  # the OpenAI wire body, sent to the local tier


def test_the_model_layer_alone_parses_its_own_families() -> None:
    """``local:`` needs no import side effect; ``offline:`` is not the model layer's: it is
    unknown until the baselines (a package above) register it through ``register_provider``."""
    done = _python(
        "from app.llm.providers.families import parse_model\n"
        "print(parse_model('local:smollm2').provider)\n"
        "try:\n"
        "    parse_model('offline:extractive')\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__)\n"
        "import app.baselines\n"
        "print(parse_model('offline:extractive').provider)\n"
        "import sys\n"
        "print(sorted(m for m in sys.modules if m.startswith('app.baselines.')))\n"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:4] == [
        "local:smollm2",
        "ConfigError",
        "offline:extractive",
        "[]",  # registering imports no baseline module: they load when first used
    ]


def test_the_baselines_register_through_the_public_seam() -> None:
    import app.baselines

    offline = families.FAMILIES["offline"]
    assert offline.provider is None  # a closed family: each model its own provider
    assert dict(offline.models) == {
        "extractive": "app.baselines.extractive:ExtractiveProvider",
        "reference-judge": "app.baselines.reference_judge:ReferenceJudgeProvider",
    }
    app.baselines.register()  # idempotent
    assert list(families.FAMILIES["offline"].models) == ["extractive", "reference-judge"]
    with pytest.raises(ConfigError, match=r"offline:extractive, offline:reference-judge"):
        parse_model("offline:nope")


def test_the_base_url_error_names_the_families_that_take_one() -> None:
    class Stub:  # never instantiated: only the table entry matters
        pass

    with registered({"vllmlike": Stub}, base_url=True):  # type: ignore[dict-item]
        assert parse_provider("vllmlike:q@http://127.0.0.1:9/v1").base_url == (
            "http://127.0.0.1:9/v1"
        )
        with pytest.raises(ConfigError) as err:
            parse_model("anthropic:claude@http://127.0.0.1:9/v1")
        message = str(err.value)
        assert "openai:<model>@<base_url>" in message
        assert "vllmlike:<model>@<base_url>" in message
    assert "vllmlike" not in families.FAMILIES  # restored


def test_an_unknown_family_lists_the_table() -> None:
    with pytest.raises(ConfigError) as err:
        parse_model("mistral:large")
    for name in families.FAMILIES:
        assert f"{name} (" in str(err.value)
    with pytest.raises(ConfigError, match="local \\("):
        parse_provider("gpt-4o")  # a bare id names no provider: the families are listed
