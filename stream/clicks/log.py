"""Click sessions → weighted preference pairs: pair strategies, IPS and position-bias weights.

A click session shows items (each optionally with its ``position``, 1 = top, and its
``propensity``) and lists the clicked ones. A click is biased evidence: an item can only be
clicked where the user looked at it (*examination*, which falls with the position) and where the
logging policy put it (Joachims et al. 2005, 2017). This module turns a session into pairs and
weights, the contract (:func:`stream.contract.parse_click_session`) turns those into
:class:`~stream.contract.PreferenceExample` records.

Strategies (which pairs a session yields; *c* is a clicked item at position *p*, *o* any shown
item that was not clicked):

=================  ===========================================  ==================================
strategy           pairs                                        reference
=================  ===========================================  ==================================
``all``            c ≻ o for every non-clicked shown o          Hu et al. 2022, App. B (default)
``skipped_above``  c ≻ o for non-clicked o shown above c        Joachims 2002, "click > skip above"
                   (position(o) < p)
``next``           c ≻ o for non-clicked o at position p + 1    Joachims et al. 2005, "click > no-click next"
=================  ===========================================  ==================================

Clicked items never play each other. Without positions, the order of ``shown`` is the position.

Weights (multiplied into the session ``weight`` of every pair of a clicked item *c*):

* ``none`` — 1 (the naive estimate, biased towards what the logging policy showed on top);
* ``ips`` — 1 / max(ρ_c, clip), the inverse propensity of the clicked item (Joachims, Swaminathan
  & Schnabel 2017, eq. 6: the propensity-weighted empirical risk is unbiased for the
  full-information risk whenever ρ > 0). ρ_c is the session's ``propensity`` of *c* when given,
  else the position-bias (examination) estimate θ of its position from ``click_examination``
  (estimated by :func:`estimate_examination_em` or, under a uniformly random logging policy,
  :func:`examination_from_ctr`; Wang et al. 2018), else 1 (counted as ``unweighted`` by
  :class:`SessionExpander`);
* ``snips`` — the ``ips`` weight divided by the running mean of the ``ips`` weights this expander
  has produced (the self-normalised estimator of Swaminathan & Joachims 2015, §4, in streaming
  form). The normaliser is the mean over the messages this process saw, so a restarted worker
  re-weights replayed messages slightly differently; the direction of every gradient is unchanged;
* ``ips_sample`` — for learners that ignore weights (the refitting GPMs): the clicked item's pairs
  are kept, with weight 1, with probability w / w_max = clip / max(ρ_c, clip) — importance
  weighting by rejection sampling, unbiased for the ``ips`` objective up to the constant w_max.
  The draw is a hash of ``"<session_id>:<clicked_id>"``, so every replay keeps the same pairs.

The ``propensity`` field is the probability that a click on this item, there, could be
observed: the logging policy's probability of showing it at that position (Open Bandit's
``propensity_score``), an examination probability (Joachims et al. 2017, §4), or their product.

Pair orientation: ``clicked_left`` puts the clicked item on the left with outcome +1 (the
historical contract); ``hashed`` puts it left or right by a hash of the pair's ``event_id``
(outcome +1 / −1), so that progressive validation sees both classes (ROC AUC is undefined on a
single class) while every replay orients a pair the same way.

Examples
--------
>>> shown = [{"id": "a", "position": 1}, {"id": "b", "position": 2}, {"id": "c", "position": 3}]
>>> SessionExpander(ClickPairing(strategy="skipped_above")).plan("s", shown, {"c"})
[(2, 0, 1.0, False), (2, 1, 1.0, False)]
>>> SessionExpander(ClickPairing(strategy="next")).plan("s", shown, {"b"})
[(1, 2, 1.0, False)]

References
----------
T. Joachims. Optimizing search engines using clickthrough data. KDD 2002, §4.
T. Joachims, L. Granka, B. Pan, H. Hembrooke, G. Gay. Accurately interpreting clickthrough data
as implicit feedback. SIGIR 2005, §5 (strategies "click > skip above", "click > no-click next").
T. Joachims, A. Swaminathan, T. Schnabel. Unbiased learning-to-rank with biased feedback.
WSDM 2017, §3–4 (propensity-weighted risk, eq. 6; position-based propensities).
A. Swaminathan, T. Joachims. The self-normalized estimator for counterfactual learning.
NeurIPS 2015, §4.
X. Wang, N. Golbandi, M. Bendersky, D. Metzler, M. Najork. Position bias estimation for
unbiased learning to rank in personal search. WSDM 2018, §3 (position-based click model).
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from learners.exceptions import InvalidParameterError

__all__ = [
    "ORIENTATIONS",
    "STRATEGIES",
    "WEIGHTINGS",
    "ClickPairing",
    "SessionExpander",
    "ctr_by_position",
    "estimate_examination_em",
    "examination_from_ctr",
    "parse_examination",
    "slot_problem",
]

STRATEGIES = ("all", "skipped_above", "next")
WEIGHTINGS = ("none", "ips", "snips", "ips_sample")
ORIENTATIONS = ("clicked_left", "hashed")


def parse_examination(value: str | Sequence[float] | None) -> tuple[float, ...] | None:
    """Examination probabilities θ_1, θ_2, … per position from ``"1,0.5,0.33"`` or a sequence.

    Raises
    ------
    InvalidParameterError
        Unless every value is a number in (0, 1].

    Examples
    --------
    >>> parse_examination("1, 0.5,0.25")
    (1.0, 0.5, 0.25)
    """
    if value is None or value == "":
        return None
    parts = [p.strip() for p in value.split(",")] if isinstance(value, str) else list(value)
    try:
        theta = tuple(float(p) for p in parts)
    except (TypeError, ValueError):
        theta = ()
    if not theta or not all(math.isfinite(t) and 0.0 < t <= 1.0 for t in theta):
        raise InvalidParameterError(
            "The 'click_examination' setting must list examination probabilities in (0, 1] per position, "
            f"top first, e.g. '1,0.6,0.4'. Got {value!r} instead.")
    return theta


@dataclass(frozen=True)
class ClickPairing:
    """How click sessions become pairs (the ``click_*`` settings).

    Parameters
    ----------
    strategy : {"all", "skipped_above", "next"}
    weighting : {"none", "ips", "snips", "ips_sample"}
    clip : float in (0, 1], default 0.01
        Propensities below ``clip`` count as ``clip`` (weights at most 1/clip).
    examination : tuple of float, optional
        θ per position (1-based), used for clicked items without a ``propensity``; positions
        beyond the tuple use its last value.
    orientation : {"clicked_left", "hashed"}
    """

    strategy: str = "all"
    weighting: str = "none"
    clip: float = 0.01
    examination: tuple[float, ...] | None = None
    orientation: str = "clicked_left"

    def __post_init__(self) -> None:
        for name, allowed in (("strategy", STRATEGIES), ("weighting", WEIGHTINGS), ("orientation", ORIENTATIONS)):
            v = getattr(self, name)
            if v not in allowed:
                raise InvalidParameterError(f"The click_{'pairs' if name == 'strategy' else name} setting must be one "
                                            f"of {allowed}. Got {v!r} instead.")
        if not (isinstance(self.clip, (int, float)) and 0.0 < self.clip <= 1.0):
            raise InvalidParameterError(f"The click_propensity_clip setting must be a number in (0, 1]. Got {self.clip!r} instead.")
        object.__setattr__(self, "examination", parse_examination(self.examination))

    @classmethod
    def from_settings(cls, settings: Any) -> "ClickPairing":
        """The pairing named by a :class:`stream.settings.Settings` (defaults where it lacks a field)."""
        return cls(strategy=getattr(settings, "click_pairs", "all"),
                   weighting=getattr(settings, "click_weighting", "none"),
                   clip=getattr(settings, "click_propensity_clip", 0.01),
                   examination=getattr(settings, "click_examination", None),
                   orientation=getattr(settings, "click_orientation", "clicked_left"))


def slot_problem(shown: Sequence[Mapping[str, Any]]) -> str | None:
    """Cross-field check of ``position``/``propensity`` the JSON Schema cannot express.

    The schema already demands an integer position ≥ 1 and a propensity in (0, 1]; here: positions
    are given for every shown item or for none, and propensities are finite.

    Returns
    -------
    str or None
        A one-line reason (for a ``schema_violation`` dead letter), or ``None`` when fine.
    """
    has = [("position" in s) for s in shown]
    if any(has) and not all(has):
        missing = [s.get("id") for s, h in zip(shown, has) if not h][:5]
        return f"'position' is given for some shown items but not for {missing}; give it for every shown item or none."
    for j, s in enumerate(shown):
        p = s.get("propensity")
        if p is not None and not (isinstance(p, (int, float)) and 0.0 < float(p) <= 1.0):
            return f"shown[{j}].propensity must be a probability in (0, 1]; got {p!r}."
    return None


def _hash_side(event_id: str) -> bool:
    return bool(zlib.crc32(event_id.encode("utf-8")) & 1)


class SessionExpander:
    """Plans the pairs of click sessions under one :class:`ClickPairing`.

    Holds the running mean of the IPS weights for ``snips`` and counts clicked items whose weight
    had no propensity or examination estimate (``unweighted``).

    Parameters
    ----------
    pairing : ClickPairing, optional
    """

    def __init__(self, pairing: ClickPairing | None = None) -> None:
        self.pairing = pairing or ClickPairing()
        self._w_sum = 0.0
        self._w_n = 0
        self.unweighted = 0

    def ips_weight(self, slot: Mapping[str, Any], position: int) -> float:
        """1 / max(ρ, clip) for one clicked slot (``propensity``, else θ(position), else 1)."""
        cfg = self.pairing
        rho = slot.get("propensity")
        if rho is None and cfg.examination is not None and "position" in slot:
            theta = cfg.examination
            rho = theta[min(position, len(theta)) - 1]
        if rho is None:
            self.unweighted += 1
            return 1.0
        return 1.0 / max(float(rho), cfg.clip)

    def plan(self, session_id: str, shown: Sequence[Mapping[str, Any]], clicked: set) -> list[tuple[int, int, float, bool]]:
        """Pairs of one validated session.

        Parameters
        ----------
        session_id : str
        shown : sequence of dict
            The session's shown items (``id``, optional ``position``/``propensity``).
        clicked : set of str

        Returns
        -------
        list of (int, int, float, bool)
            ``(clicked index, other index, weight factor, swap)`` in the order clicked item, then
            other item, by their index in ``shown``; ``swap`` puts the clicked item on the right
            (``hashed`` orientation only).
        """
        cfg = self.pairing
        if not clicked or len(clicked) >= len(shown):
            return []
        pos = [int(s["position"]) if "position" in s else j + 1 for j, s in enumerate(shown)]
        is_clicked = [s["id"] in clicked for s in shown]
        out = []
        for a, sa in enumerate(shown):
            if not is_clicked[a]:
                continue
            if cfg.strategy == "all":
                others = [b for b in range(len(shown)) if not is_clicked[b]]
            elif cfg.strategy == "skipped_above":
                others = [b for b in range(len(shown)) if not is_clicked[b] and pos[b] < pos[a]]
            else:
                others = [b for b in range(len(shown)) if not is_clicked[b] and pos[b] == pos[a] + 1]
            if not others:
                continue
            w = 1.0
            if cfg.weighting != "none":
                w = self.ips_weight(sa, pos[a])
                if cfg.weighting == "ips_sample":
                    u = (zlib.crc32(f"{session_id}:{sa['id']}".encode("utf-8")) + 0.5) / 2.0 ** 32
                    if u >= w * cfg.clip:
                        continue
                    w = 1.0
                elif cfg.weighting == "snips":
                    self._w_sum += w
                    self._w_n += 1
                    w = w / (self._w_sum / self._w_n)
            for b in others:
                swap = cfg.orientation == "hashed" and _hash_side(f"{session_id}:{sa['id']}>{shown[b]['id']}")
                out.append((a, b, w, swap))
        return out


# ------------------------------------------------------------------ position bias
def ctr_by_position(positions: np.ndarray, clicks: np.ndarray, z: float = 1.96) -> dict[int, dict[str, float]]:
    """Click-through rate per position with a Wilson score interval.

    Parameters
    ----------
    positions : ndarray of shape (n,), int
    clicks : ndarray of shape (n,), {0, 1}
    z : float
        Normal quantile of the interval (1.96 = 95 %).

    Returns
    -------
    dict
        ``{position: {"impressions", "clicks", "ctr", "lo", "hi"}}`` in position order.

    Examples
    --------
    >>> r = ctr_by_position(np.array([1, 1, 2, 2]), np.array([1, 0, 0, 0]))
    >>> r[1]["ctr"], r[2]["clicks"]
    (0.5, 0)
    """
    positions = np.asarray(positions).astype(int)
    clicks = np.asarray(clicks, dtype=float)
    out = {}
    for p in sorted(set(positions.tolist())):
        m = positions == p
        n = int(m.sum())
        k = float(clicks[m].sum())
        phat = k / n
        den = 1 + z * z / n
        centre = (phat + z * z / (2 * n)) / den
        half = z * math.sqrt(phat * (1 - phat) / n + z * z / (4 * n * n)) / den
        out[p] = {"impressions": n, "clicks": int(k), "ctr": phat, "lo": max(0.0, centre - half), "hi": min(1.0, centre + half)}
    return out


def examination_from_ctr(ctr: Mapping[int, Mapping[str, float]]) -> tuple[float, ...]:
    """Relative examination θ_p = CTR_p / max CTR from a *uniformly random* logging policy.

    Under a position-based model P(click) = θ_p · γ_item and a logging policy that puts items at
    positions independently of their relevance (Open Bandit's ``random`` policy), E[click | p]
    = θ_p · E[γ], so the CTRs are proportional to θ (Wang et al. 2018, §3; the intervention
    idea of Joachims et al. 2017, §5). Under any other logging policy this confounds position
    with relevance; do not use it there.

    Examples
    --------
    >>> examination_from_ctr({1: {"ctr": 0.02}, 2: {"ctr": 0.01}, 3: {"ctr": 0.005}})
    (1.0, 0.5, 0.25)
    """
    ps = sorted(ctr)
    top = max(ctr[p]["ctr"] for p in ps)
    if top <= 0:
        raise InvalidParameterError("examination_from_ctr needs at least one click; got a CTR of 0 at every position.")
    return tuple(max(ctr[p]["ctr"] / top, 1e-6) for p in ps)


def estimate_examination_em(sessions, n_iter: int = 100, tol: float = 1e-6) -> tuple[float, ...]:
    """Examination θ per position by EM for the position-based click model, from clicks alone.

    The position-based model says P(click on d at position k) = θ_k · γ_d. Treating examination
    and relevance as latent, EM alternates (Wang et al. 2018, §4, with one relevance parameter
    per item instead of their regression; Chuklin, Markov & de Rijke 2015, §4.1): for a skipped
    impression, P(examined | no click) = θ_k (1 − γ_d) / (1 − θ_k γ_d) and P(relevant | no click)
    = (1 − θ_k) γ_d / (1 − θ_k γ_d); then θ_k and γ_d are the means of [click + (1 − click) ·
    posterior] over their impressions. θ is identified when the logging policy shows items at
    several positions (any randomised ranker); the result is scaled so that max θ = 1 (IPS
    weights only need ratios, and ``snips`` removes the scale anyway).

    Parameters
    ----------
    sessions : iterable of dict
        Click sessions with ``shown`` (``id``, ``position``) and ``clicked``.
    n_iter : int, default 100
    tol : float
        Stop when θ moves less than this.

    Returns
    -------
    tuple of float
        θ for positions 1..max position (positions never logged get the next lower one's value).

    Examples
    --------
    >>> s = [{"shown": [{"id": "a", "position": 1}, {"id": "b", "position": 2}], "clicked": ["a"]},
    ...      {"shown": [{"id": "b", "position": 1}, {"id": "a", "position": 2}], "clicked": ["b"]}]
    >>> estimate_examination_em(s)[0]
    1.0
    """
    items: dict[str, int] = {}
    pos, item, click = [], [], []
    for sess in sessions:
        clicked = set(sess["clicked"])
        for j, slot in enumerate(sess["shown"]):
            pos.append(int(slot.get("position", j + 1)) - 1)
            item.append(items.setdefault(slot["id"], len(items)))
            click.append(1.0 if slot["id"] in clicked else 0.0)
    if not click or sum(click) == 0:
        raise InvalidParameterError("estimate_examination_em needs sessions with at least one click.")
    pos_a, item_a, c = np.array(pos), np.array(item), np.array(click)
    K, n_items = int(pos_a.max()) + 1, len(items)
    n_k = np.maximum(np.bincount(pos_a, minlength=K), 1)
    n_d = np.maximum(np.bincount(item_a, minlength=n_items), 1)
    theta = np.full(K, 0.5)
    gamma = np.full(n_items, 0.5)
    for _ in range(n_iter):
        t, g = theta[pos_a], gamma[item_a]
        den = np.maximum(1.0 - t * g, 1e-12)
        e_post = c + (1 - c) * t * (1 - g) / den
        r_post = c + (1 - c) * (1 - t) * g / den
        new_theta = np.clip(np.bincount(pos_a, e_post, minlength=K) / n_k, 1e-6, 1.0)
        gamma = np.clip(np.bincount(item_a, r_post, minlength=n_items) / n_d, 1e-6, 1.0 - 1e-6)
        done = np.max(np.abs(new_theta - theta)) < tol
        theta = new_theta
        if done:
            break
    seen = np.bincount(pos_a, minlength=K) > 0
    for k in range(1, K):
        if not seen[k]:
            theta[k] = theta[k - 1]
    return tuple(float(v) for v in theta / theta.max())
