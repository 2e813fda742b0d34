"""The always-valid test behind `rag ops ab`, checked by simulation under hourly looks.

Days of traffic are simulated vectorised (fixed seed): each hour a Poisson number of users
per arm, each with one answer that gets a 👎 with the arm's probability; the test looks at
the end of every hour for 24 hours. An equal arm must be flagged (at any look) in at most
α of the days; a planted worse arm must be flagged in most of them. The naive fixed-horizon
z-test at every look is simulated too: it exceeds α, so the simulation can tell.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from app.eval.stats import sequential

REPS, HOURS, USERS_PER_HOUR, BASE = 400, 24, 400, 0.05
ALPHA = 0.05


def _days(candidate_rate: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Per day and look: (θ̂, V) of the 👎 rate difference, candidate − control."""
    rng = np.random.default_rng(seed)
    n = rng.poisson(USERS_PER_HOUR, size=(2, REPS, HOURS)).cumsum(axis=2)
    hourly = np.diff(n, axis=2, prepend=0)
    downs = rng.binomial(hourly, np.array([BASE, candidate_rate])[:, None, None]).cumsum(axis=2)
    p = downs / n
    var = p * (1 - p) / (n - 1)  # the per-unit sample variance over the arm's n
    theta = p[1] - p[0]
    return theta, var[0] + var[1]


def _flagged(theta: np.ndarray, var: np.ndarray) -> np.ndarray:
    p0 = BASE
    tau2 = sequential.tau2_for(math.sqrt(p0 * (1 - p0)))
    lr = sequential.mixture_lr(theta, var, tau2)
    return (sequential.always_valid_p(lr) <= ALPHA).any(axis=1)


def test_equal_arms_false_alarm_rate_under_hourly_looks() -> None:
    theta, var = _days(BASE, seed=20261205)
    false_alarms = _flagged(theta, var).mean()
    naive = (np.abs(theta / np.sqrt(var)) > stats.norm.ppf(1 - ALPHA / 2)).any(axis=1).mean()
    assert false_alarms <= ALPHA, false_alarms
    assert naive > 2 * ALPHA, naive  # peeking at a fixed-horizon test: the inflation is seen


def test_a_planted_worse_arm_is_flagged() -> None:
    theta, var = _days(BASE + 0.02, seed=7)  # 👎 rate 5 % → 7 %
    power = _flagged(theta, var).mean()
    assert power >= 0.9, power
    # flagged on the bad side: the confidence sequence lies above 0
    tau2 = sequential.tau2_for(math.sqrt(BASE * (1 - BASE)))
    low = theta - sequential.radius(var, tau2, ALPHA)
    assert (low.max(axis=1) > 0).mean() == pytest.approx(power, abs=0.02)


def test_mixture_ratio_and_radius_by_hand() -> None:
    # Λ = sqrt(V/(V+τ²)) · exp(τ² θ² / (2 V (V+τ²))), at V = 1e-4, τ² = 4e-4, θ = 0.03
    v, t2, th = 1e-4, 4e-4, 0.03
    by_hand = math.sqrt(v / (v + t2)) * math.exp(t2 * th**2 / (2 * v * (v + t2)))
    assert float(sequential.mixture_lr(th, v, t2)) == pytest.approx(by_hand, rel=1e-12)
    # the confidence sequence's edge is exactly where Λ reaches 1/α
    r = float(sequential.radius(v, t2, ALPHA))
    assert float(sequential.mixture_lr(r, v, t2)) == pytest.approx(1 / ALPHA, rel=1e-9)
    assert float(sequential.mixture_lr(0.0, 0.0, t2)) == 1.0  # no variance: no evidence
    assert math.isinf(float(sequential.radius(0.0, t2)))
    assert sequential.always_valid_p(np.array([2.0, 30.0, 5.0])).tolist() == [
        0.5,
        pytest.approx(1 / 30),
        pytest.approx(1 / 30),
    ]


if __name__ == "__main__":  # the figures quoted in docs/operations.md
    theta, var = _days(BASE, seed=20261205)
    naive = (np.abs(theta / np.sqrt(var)) > stats.norm.ppf(1 - ALPHA / 2)).any(axis=1).mean()
    print(f"{REPS} days × {HOURS} hourly looks, {USERS_PER_HOUR} users/hour/arm, 👎 {BASE:.0%}")
    print(f"equal arms flagged: mSPRT {_flagged(theta, var).mean():.1%}, naive z-test {naive:.1%}")
    for extra in (0.01, 0.02):
        theta, var = _days(BASE + extra, seed=7)
        print(f"candidate +{extra * 100:.0f} pp flagged: {_flagged(theta, var).mean():.1%}")
