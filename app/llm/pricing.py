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
        if not isinstance(models, dict) or family == "batch_discount":
            continue  # as_of, sources; the batch discounts are read by load_batch_discounts
        for model, row in models.items():
            try:
                table[(family, model)] = Price(**{k: float(v) for k, v in row.items()})
            except (TypeError, ValueError) as exc:
                raise ConfigError(
                    f"{path}: [{family}.{model!r}] must have numeric input, output, "
                    f"cache_read, cache_write: {exc}"
                ) from exc
    return table


@functools.cache
def load_batch_discounts(path: Path = PRICES_FILE) -> dict[str, float]:
    """``{family: factor}`` from ``[batch_discount]``: a batch call costs ``factor`` × list."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    raw = data.get("batch_discount", {})
    out: dict[str, float] = {}
    for family, factor in raw.items() if isinstance(raw, dict) else ():
        if not isinstance(factor, int | float) or not 0 < float(factor) <= 1:
            raise ConfigError(f"{path}: [batch_discount] {family} must be a number in (0, 1]")
        out[family] = float(factor)
    return out


def price_for(spec: ProviderSpec) -> Price | None:
    if spec.offline:
        return Price(0.0, 0.0)
    return load_prices().get((spec.family, spec.model))


def cost_usd(spec: ProviderSpec, usage: Usage, *, batch: bool = False) -> float | None:
    """The cost of one call, or None when the model is not in the price table. A call made
    through the provider's batch API costs the family's ``[batch_discount]`` share; a family
    without one is unpriced in a batch (never a guess)."""
    price = price_for(spec)
    if price is None:
        return None
    cost = price.cost(usage)
    if batch and not spec.offline:
        factor = load_batch_discounts().get(spec.family)
        if factor is None:
            return None
        cost *= factor
    return round(cost, 10)
