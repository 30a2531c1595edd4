"""The charged pre-release of the planning facts (issue 39 item 5; SPECS.md "The pre-release of
the planning facts").

``PrivateATE(prerelease=r)`` spends the share ``r`` of zeta^2 on the per-arm vector
``(n_a, sum y, sum y^2)`` (``y`` the outcome clipped to its public bounds and scaled to
[-1, 1]; arm 1 then arm 0) with exact discrete Gaussian noise of scale ``sqrt(6)/zeta_pre`` per
coordinate, drawn once from OS entropy after the whole charge is reserved. Post-processing gives
the treated share and each arm's outcome sd; ``auto`` then chooses, from these learned facts
(a stated or registered fact takes precedence), the estimator the release runs on the rest,
``zeta sqrt(1 - r)``. GDP composition gives back zeta, the charge the user asked for.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from dpcausal.accounting import PrivacyCharge, compose_gdp, gdp_epsilon, gdp_to_zcdp
from dpcausal.ate import sums
from dpcausal.contract import Privacy
from dpcausal.missing import apply_missing
from dpcausal.noise import gaussian_vector_mechanism, gaussian_vector_sigma
from dpcausal.validation import private_failures

if TYPE_CHECKING:
    from dpcausal.ate.estimator import PrivateATE
    from dpcausal.ate.release import ATERelease
    from dpcausal.contract import Prepared

#: L2 sensitivity of the pre-release vector under replace-one (SPECS.md): a row moving between
#: arms changes (1, y, y^2) in both arms, each of squared norm at most 3.
SENSITIVITY = math.sqrt(6.0)
#: The largest share of zeta^2 a pre-release may take (the release keeps at least half).
MAX_SHARE = 0.5
#: The planning sd's floor, as a share of the bounds' half-width h (the planner needs sd > 0).
SD_FLOOR = 1e-3
FACTS = ("treated_share", "outcome_sd")


def split(zeta: float, share: float) -> tuple[float, float]:
    """``(zeta_pre, zeta_release) = (zeta sqrt(r), zeta sqrt(1 - r))``: GDP composition
    ``sqrt(zeta_pre^2 + zeta_release^2)`` gives back zeta (SPECS.md)."""
    return zeta * math.sqrt(share), zeta * math.sqrt(1.0 - share)


def sigma(zeta_pre: float) -> float:
    """The noise sd of each of the six coordinates: ``sqrt(6) / zeta_pre``, widened by the
    lattice step as :func:`dpcausal.noise.gaussian_vector_mechanism` draws it."""
    return gaussian_vector_sigma(SENSITIVITY / zeta_pre, SENSITIVITY, 6)


def check(mechanism: PrivateATE) -> None:
    """The refusals of ``prerelease``, from public parameters only (before any charge): a
    number in (0, 0.5]; only with ``estimator="auto"`` where the declarations leave it a
    choice (a randomized design, or ``assume_linear`` with ``covariate_bounds``); not when
    both planning facts are stated (or registered), which would spend for nothing."""
    from dpcausal.ate.estimator import _positive_zeta

    r = mechanism.prerelease
    if r is None:
        return
    _positive_zeta(mechanism.zeta)      # split below: a zeta given as text is refused here
    if not (isinstance(r, (int, float)) and not isinstance(r, bool) and 0 < r <= MAX_SHARE):
        raise ValueError(f"prerelease must be a share of zeta^2 in (0, {MAX_SHARE:g}] or None, "
                         f"got {r!r}")
    stop = (f"prerelease={r!r} (config: estimator.prerelease) would spend {r:g} of zeta^2 "
            "learning the treated share and the outcome sd, but")
    if mechanism.estimator != "auto":
        raise ValueError(f"{stop} estimator={mechanism.estimator!r} is fixed and plans nothing "
                         "from them: drop prerelease, or use estimator='auto'")
    if not chooses(mechanism):
        raise ValueError(f"{stop} in an observational design auto can only take the "
                         "model-agnostic ensemble, whose plan does not depend on them: drop "
                         "prerelease (auto compares lin only with covariate_bounds and "
                         "assume_linear=True, or in design='randomized')")
    if all(getattr(mechanism, f) is not None for f in FACTS):
        raise ValueError(f"{stop} treated_share and outcome_sd are both stated (or registered "
                         "by the curator), and stated facts take precedence: drop prerelease")


def chooses(mechanism: PrivateATE) -> bool:
    """Whether ``auto``'s choice may depend on the planning facts: more than the ensemble is
    valid under the declarations (:meth:`PrivateATE.resolved_estimator`)."""
    return mechanism.design == "randomized" or (mechanism.covariate_bounds is not None
                                                 and bool(mechanism.assume_linear))


@dataclass(frozen=True)
class LearnedFacts:
    """The pre-released planning facts (post-processing of the noisy vector; SPECS.md): the
    treated share in [1/n, 1 - 1/n], each arm's outcome sd in [0, h], and ``outcome_sd``, the
    one spread the planner takes, ``sqrt((1 - s) sd_1^2 + s sd_0^2)`` (the same sampling
    variance ``sd^2 (1/n_1 + 1/n_0)`` as the two arms' sds), floored at ``SD_FLOOR h``."""

    treated_share: float
    outcome_sd_treated: float
    outcome_sd_control: float
    outcome_sd: float

    @classmethod
    def from_noisy(cls, noisy: np.ndarray, n: int, outcome_bounds: tuple[float, float]
                   ) -> LearnedFacts:
        """The facts from the noisy vector ``(n_1, S_1, Q_1, n_0, S_0, Q_0)`` (scaled units):
        counts clipped to [0, n]; share ``c_1 / (c_1 + c_0)`` (1/2 if both are 0) clipped to
        [1/n, 1 - 1/n]; per arm the mean ``S/c`` clipped to [-1, 1], the second moment ``Q/c``
        clipped to [0, 1] (``c`` floored at 1), sd ``h sqrt(max(0, Q/c - (S/c)^2))``."""
        h = (outcome_bounds[1] - outcome_bounds[0]) / 2.0
        v = np.asarray(noisy, dtype=float)
        counts = np.clip(v[[0, 3]], 0.0, float(n))
        total = float(counts.sum())
        share = float(counts[0]) / total if total > 0 else 0.5
        if n >= 2:      # [1/n, 1 - 1/n] is empty below two rows
            share = min(max(share, 1.0 / n), 1.0 - 1.0 / n)
        sds = []
        for c, s, q in ((counts[0], v[1], v[2]), (counts[1], v[4], v[5])):
            c = max(float(c), 1.0)
            mean = min(max(s / c, -1.0), 1.0)
            second = min(max(q / c, 0.0), 1.0)
            sds.append(h * math.sqrt(max(0.0, second - mean * mean)))
        pooled = min(math.sqrt((1.0 - share) * sds[0] ** 2 + share * sds[1] ** 2), h)
        return cls(share, sds[0], sds[1], max(pooled, SD_FLOOR * h))


def statistics(mechanism: PrivateATE, X: Any, A: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """The exact vector ``(n_1, S_1, Q_1, n_0, S_0, Q_0)`` over the rows the declared
    missing-value policy uses (:func:`dpcausal.missing.apply_missing`: under "impute" a row
    without a usable treatment or outcome adds nothing, under "drop" only complete cases add):
    :func:`dpcausal.ate.sums.chunk_statistics` of ``dim``. Non-private: stays in memory."""
    done = apply_missing(X, A, Y, mechanism.missing, mechanism.missing_fill,
                         indicators="in_folds")
    return sums.chunk_statistics(None, done.A, done.Y, estimator="dim",
                                 outcome_bounds=mechanism._bounds(), usable=done.usable)


def informed(mechanism: PrivateATE, facts: LearnedFacts | None = None,
             estimator: str | None = None, noise_seed: int | None = None) -> PrivateATE:
    """The mechanism the release runs after the pre-release: zeta the release's share, no
    pre-release, each planning fact as stated, else ``facts`` (learned; None: the planner's
    defaults, as the plan shows before the charge); ``estimator`` fixes the estimator (the
    checks of each one auto may take). A shallow copy, so an orchestrator's subclass (its
    fold-fit plan) carries over."""
    out = copy.copy(mechanism)
    for memo in ("_choices", "_folds_memo"):   # PrivateATE._memoised: a fresh one per copy
        out.__dict__.pop(memo, None)
    zeta_release = split(float(mechanism.zeta), float(mechanism.prerelease or 0.0))[1]
    params: dict[str, Any] = {"zeta": zeta_release, "prerelease": None}
    if facts is not None:
        params.update({f: getattr(mechanism, f) if getattr(mechanism, f) is not None
                       else getattr(facts, f) for f in FACTS})
    if estimator is not None:
        params["estimator"] = estimator
    if noise_seed is not None:
        params["noise_seed"] = noise_seed
    return out.set_params(**params)


def candidates(mechanism: PrivateATE, n: int, d: int) -> list[PrivateATE]:
    """One :func:`informed` mechanism per estimator ``auto`` may take (the selectable rows of
    :meth:`PrivateATE.compare_estimators`): each one's refusals are checked before the
    charge, so the release completes whichever the learned facts choose."""
    mechanism._check_choice()
    table = informed(mechanism).compare_estimators(n, d)
    return [informed(mechanism, estimator=str(name))
            for name in table.loc[table["selectable"], "estimator"]]


def charge(mechanism: PrivateATE, n: int, d: int | None) -> PrivacyCharge:
    """The data-free charge: the pre-release's ``zeta_pre`` composed (GDP) with the release's
    charge at ``zeta sqrt(1 - r)``, the same for every estimator auto may take (checked), so
    zeta in all (SPECS.md)."""
    if d is None:
        raise ValueError("prerelease: auto compares estimators whose noise depends on d: pass "
                         "d (e.g. privacy_charge(n, d))")
    charges = [m.privacy_charge(n, d) for m in candidates(mechanism, n, d)]
    zetas = {round(float(c.zeta or 0.0), 12) for c in charges}
    if len(zetas) != 1:
        raise AssertionError(f"bug: the estimators auto may take charge differently: {zetas}")
    zeta_pre = split(float(mechanism.zeta), float(mechanism.prerelease or 0.0))[0]
    release_zeta = float(charges[0].zeta or 0.0)
    detail: dict[str, Any] = {"estimator": "auto", "prerelease": mechanism.prerelease,
                              "zeta_prerelease": zeta_pre, "zeta_release": release_zeta,
                              "learns": [f for f in FACTS if getattr(mechanism, f) is None]}
    public = sorted({f for c in charges for f in c.detail.get("public_facts", [])})
    if public:
        detail["public_facts"] = public
    return PrivacyCharge("gaussian", zeta=compose_gdp([zeta_pre, release_zeta]),
                         delta=mechanism.delta, detail=detail)


def release(mechanism: PrivateATE, prepared: Prepared, evaluation: bool) -> ATERelease:
    """The pre-release, the choice, then the release, all inside one charged draw: the vector
    of :func:`statistics` with its noise drawn once, the :class:`LearnedFacts`, the
    :func:`informed` mechanism's release on the same checked input, and the result with the
    whole charge's privacy and the learned facts published (:func:`published`). Total after
    the charge, as every release phase."""
    n = prepared.public.n
    zeta_pre = split(float(mechanism.zeta), float(mechanism.prerelease or 0.0))[0]
    rng = mechanism._noise_rng(evaluation)
    with private_failures(evaluation, "pre-release"):
        stats = statistics(mechanism, *prepared.data)
    noisy = gaussian_vector_mechanism(stats, SENSITIVITY / zeta_pre, SENSITIVITY, rng)
    facts = LearnedFacts.from_noisy(noisy, n, mechanism._bounds())
    seed = int(rng.integers(2**62)) if evaluation and mechanism.noise_seed is not None else None
    chosen = informed(mechanism, facts, noise_seed=seed)
    return published(chosen._private_release(prepared, evaluation=evaluation), mechanism,
                     facts, zeta_pre)


def published(base: ATERelease, mechanism: PrivateATE, facts: LearnedFacts,
              zeta_pre: float) -> ATERelease:
    """``base`` (the release at ``zeta sqrt(1 - r)``) with the whole charge's privacy (GDP
    composition with ``zeta_pre``) and, in its params, the pre-release: its share, zeta and
    noise sd per coordinate, the learned facts, and the facts the choice used (``treated_share``
    and ``outcome_sd``; ``facts_source`` says which were learned)."""
    zeta = compose_gdp([float(base.privacy.zeta or 0.0), zeta_pre])
    delta = base.privacy.delta
    privacy = Privacy(epsilon=gdp_epsilon(zeta, delta), delta=delta, unit=base.privacy.unit,
                      mechanism=base.privacy.mechanism, zeta=zeta, rho=gdp_to_zcdp(zeta),
                      detail={**base.privacy.detail, "zeta_prerelease": zeta_pre})
    source = {f: "stated" if getattr(mechanism, f) is not None else "learned" for f in FACTS}
    params = {**base.params, "zeta": mechanism.zeta, "zeta_release": base.params.get("zeta"),
              "prerelease": mechanism.prerelease, "prerelease_zeta": zeta_pre,
              "prerelease_sigma": sigma(zeta_pre), "prerelease_sensitivity": SENSITIVITY,
              "learned_treated_share": facts.treated_share,
              "learned_outcome_sd_treated": facts.outcome_sd_treated,
              "learned_outcome_sd_control": facts.outcome_sd_control,
              "learned_outcome_sd": facts.outcome_sd,
              "facts_source": ",".join(f"{f}:{s}" for f, s in source.items())}
    return replace(base, privacy=privacy, params=params)


def plan_line(zeta: float, share: float, learns: list[str]) -> str:
    """What a plan or a dry run says before the charge: the facts a pre-release of ``share``
    of ``zeta^2`` would learn, its cost and noise, and that ``auto`` chooses after the charge."""
    zeta_pre, zeta_release = split(zeta, share)
    return (f"{' and '.join(f.replace('_', ' ') for f in learns)}: learned by a pre-release of "
            f"{share:g}·ζ² (ζ = {zeta_pre:.3g}, noise sd {sigma(zeta_pre):.3g} per arm count, "
            "scaled sum and sum of squares); auto chooses from them after the charge and the "
            f"release runs on ζ = {zeta_release:.3g}, ζ = {zeta:g} in all")
