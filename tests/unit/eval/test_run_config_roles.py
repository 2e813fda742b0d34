"""Every RunConfig field says whether it decides a case's result: ``rag eval merge`` compares
the deciding ones across shards, so a new field must be classified, not forgotten."""

from __future__ import annotations

from app.eval.config import RunConfig, field_roles, operational_fields


def test_every_run_config_field_is_classified() -> None:
    roles = field_roles()
    assert set(roles) == set(RunConfig.model_fields)
    unclassified = sorted(name for name, role in roles.items() if role is None)
    assert unclassified == [], (
        f"RunConfig fields {unclassified} have no role: declare them Decides[...] or "
        "Operational[...] in app/eval/config.py"
    )


def test_what_shards_of_one_run_may_differ_in() -> None:
    ops = operational_fields()
    # how fast, how safe, how cached, which shard: not the results
    assert {"shard", "concurrency", "rpm", "timeout_s", "cache", "batch", "max_cost"} <= ops
    # what is asked, of whom, and how it is scored: the results
    for deciding in ("suite", "model", "judge", "prompts", "metrics", "k", "seed", "limit"):
        assert deciding not in ops
    assert all(name in RunConfig.model_fields for name in ops)
