"""Cost accounting from ``prices.toml`` (USD per million tokens, per family and model).

``Usage.input_tokens`` counts *uncached* input tokens for every provider (the OpenAI
adapter subtracts ``cached_tokens`` from ``prompt_tokens``), so one formula fits all::

    cost = (input·in + output·out + cache_read·cr + cache_write·cw) / 1e6

A model missing from the table has cost ``None`` (never a guess); offline baselines 0.0.
A model served by an OpenAI-compatible ``base_url`` is priced by its model id like any
other ``openai:`` model: add it to the table if your proxy charges for it.
"""

from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass
from pathlib import Path

from app.errors import ConfigError
from app.llm.spec import ProviderSpec
from app.llm.types import Usage

PRICES_FILE = Path(__file__).with_name("prices.toml")


@dataclass(frozen=True)
class Price:
    input: float
    output: float
    cache_read: float = 0.0
    cache_write: float = 0.0

    def cost(self, usage: Usage) -> float:
        return (
            usage.input_tokens * self.input
            + usage.output_tokens * self.output
            + usage.cache_read_tokens * self.cache_read
            + usage.cache_write_tokens * self.cache_write
        ) / 1_000_000


@functools.cache
def load_prices(path: Path = PRICES_FILE) -> dict[tuple[str, str], Price]:
    """``{(family, model): Price}`` from the TOML table."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the price table: {exc}") from exc
    table: dict[tuple[str, str], Price] = {}
    for family, models in data.items():
        if not isinstance(models, dict):
            continue  # as_of, sources
        for model, row in models.items():
            try:
                table[(family, model)] = Price(**{k: float(v) for k, v in row.items()})
            except (TypeError, ValueError) as exc:
                raise ConfigError(
                    f"{path}: [{family}.{model!r}] must have numeric input, output, "
                    f"cache_read, cache_write: {exc}"
                ) from exc
    return table


def price_for(spec: ProviderSpec) -> Price | None:
    if spec.offline:
        return Price(0.0, 0.0)
    return load_prices().get((spec.family, spec.model))


def cost_usd(spec: ProviderSpec, usage: Usage) -> float | None:
    """The cost of one call, or None when the model is not in the price table."""
    price = price_for(spec)
    return None if price is None else round(price.cost(usage), 10)
