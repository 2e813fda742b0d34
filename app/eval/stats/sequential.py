"""Always-valid inference for live A/B comparisons: the mixture sequential probability ratio
test (mSPRT) and the confidence sequence it defines.

A fixed-horizon test looked at every hour raises false alarms far above its α (24 looks at a
z-test with α = 0.05: about one equal arm in five is "significant" some hour). The mSPRT of
Johari, Koomen, Pekelis and Walsh ("Always valid inference: continuous monitoring of A/B
tests", Operations Research 2022; Robbins' normal mixture) stays valid however often one
looks: with ``θ̂`` the estimated difference (candidate − control), ``V`` its variance and a
normal mixing distribution ``θ ~ N(0, τ²)`` over the alternatives,

    Λ = sqrt(V / (V + τ²)) · exp(τ² θ̂² / (2 V (V + τ²)))

is (asymptotically) a martingale under θ = 0, so by Ville's inequality P(Λ ever ≥ 1/α) ≤ α.
The set of θ not rejected at level α is the *confidence sequence*

    θ̂ ± sqrt(V (V + τ²) / τ² · (2 log(1/α) + log((V + τ²) / V)))

which covers the true difference at every look simultaneously with probability ≥ 1 − α; the
always-valid p-value after looks 1…n is ``min(1, 1 / max Λ_k)``. The normal approximation is
what makes it asymptotic: ``V`` is estimated from the data (per-user means, so a user's
repeated answers are one unit). ``τ`` is :data:`TAU_SD` pooled per-unit standard deviations,
so one setting serves a 👎 rate and a latency alike.

Everything here works on numpy arrays as well as on floats (the simulations in
``tests/unit/stats/test_sequential.py`` run hundreds of days of hourly looks at once).
"""

from __future__ import annotations

from typing import Any

import numpy as np

TAU_SD = 0.1  # mixing scale τ, in pooled per-unit standard deviations
ALPHA = 0.05


def mixture_lr(theta: Any, variance: Any, tau2: Any) -> Any:
    """Λ, the mixture likelihood ratio of θ = 0 at estimate ``theta`` with variance
    ``variance`` (element-wise; a zero or missing variance gives Λ = 1: no evidence)."""
    theta, v, t2 = (np.asarray(x, dtype=float) for x in (theta, variance, tau2))
    ok = (v > 0) & (t2 > 0) & np.isfinite(v) & np.isfinite(theta)
    v_safe = np.where(ok, v, 1.0)
    t2_safe = np.where(ok, t2, 1.0)
    log_lr = 0.5 * np.log(v_safe / (v_safe + t2_safe)) + t2_safe * np.square(
        np.where(ok, theta, 0.0)
    ) / (2 * v_safe * (v_safe + t2_safe))
    return np.where(ok, np.exp(np.minimum(log_lr, 700.0)), 1.0)


def radius(variance: Any, tau2: Any, alpha: float = ALPHA) -> Any:
    """Half-width of the confidence sequence at level ``1 − alpha`` (inf without a variance)."""
    v, t2 = np.asarray(variance, dtype=float), np.asarray(tau2, dtype=float)
    ok = (v > 0) & (t2 > 0) & np.isfinite(v)
    v_safe, t2_safe = np.where(ok, v, 1.0), np.where(ok, t2, 1.0)
    r = np.sqrt(
        v_safe
        * (v_safe + t2_safe)
        / t2_safe
        * (2 * np.log(1 / alpha) + np.log((v_safe + t2_safe) / v_safe))
    )
    return np.where(ok, r, np.inf)


def always_valid_p(lrs: Any) -> Any:
    """The always-valid p-value after each look: ``min(1, 1 / running max Λ)`` along the
    last axis (looks in time order)."""
    running = np.maximum.accumulate(np.asarray(lrs, dtype=float), axis=-1)
    return np.minimum(1.0, 1.0 / running)


def tau2_for(pooled_sd: Any) -> Any:
    return np.square(TAU_SD * np.asarray(pooled_sd, dtype=float))


def two_sample(control: np.ndarray, candidate: np.ndarray) -> tuple[float, float, float] | None:
    """(θ̂ = mean(candidate) − mean(control), V, pooled sd) of two independent samples of
    per-unit values; None with fewer than two units in an arm."""
    if control.size < 2 or candidate.size < 2:
        return None
    va, vb = float(np.var(control, ddof=1)), float(np.var(candidate, ddof=1))
    theta = float(np.mean(candidate) - np.mean(control))
    pooled = float(
        np.sqrt(
            (va * (control.size - 1) + vb * (candidate.size - 1))
            / (control.size + candidate.size - 2)
        )
    )
    return theta, va / control.size + vb / candidate.size, pooled


def paired(differences: np.ndarray) -> tuple[float, float, float] | None:
    """(θ̂, V, sd) of per-unit differences (candidate − control) of units seen in both arms."""
    if differences.size < 2:
        return None
    var = float(np.var(differences, ddof=1))
    return float(np.mean(differences)), var / differences.size, float(np.sqrt(var))


def combine(
    parts: list[tuple[float, float, float]],
) -> tuple[float, float, float] | None:
    """Inverse-variance weighted estimate of the paired and unpaired parts (each an unbiased
    estimate of the same difference); a part with zero variance is taken alone."""
    if not parts:
        return None
    exact = [p for p in parts if p[1] <= 0]
    if exact:
        return exact[0]
    weights = [1 / p[1] for p in parts]
    total = sum(weights)
    theta = sum(w * p[0] for w, p in zip(weights, parts, strict=True)) / total
    sd = max(p[2] for p in parts)
    return theta, 1 / total, sd
