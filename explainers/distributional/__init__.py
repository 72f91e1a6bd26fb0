"""Distributional values: explanations of probabilistic outputs (Franceschi et al. 2024).

A preference outcome is a random variable — "left wins" with probability σ(g) — and a click among
``k`` shown items is a categorical one. Standard Shapley values explain one scalar of such an output
(a probability); the *distributional values* of Franceschi, Donini, Archambeau & Seeger (2024) (*Explaining
probabilistic models with distributional values*) explain the random outcome itself: with what
probability does feature ``i`` flip the outcome, and from which class to which.

Building blocks (section / equation of Franceschi et al. 2024):

* **Cooperative stochastic game** (Definition 3.1): ``v(S, ε) = g(x_S, ε)`` with *one* noise ``ε``
  shared by all coalitions (Remark 3.6: without the coupling a null player would look important).
  :class:`StochasticGame` holds the payoff's natural parameters per coalition and a
  :class:`PayoffFamily` (Bernoulli, categorical, Gaussian) that knows the reparameterisation.
* **Coalition structures / value operators** (Eq. 2, App. C): :class:`Shapley`, :class:`Banzhaf`,
  :class:`Semivalue` (weights by coalition size), :class:`RandomOrderValue` (distributions over
  permutations, e.g. ordered groups = asymmetric Shapley), :class:`ExplicitCoalitionStructure`.
* **Distributional value** (Definition 3.3, Eq. 4–5, Eq. 7): :func:`distributional_value` — exact
  enumeration for small ``n`` or Monte Carlo over permutations / coalitions with samples shared
  across players, with standard errors. Marginal contributions are analytic (Section 3.1):
  Bernoulli (comonotone coupling), categorical (Gumbel-max closed form, Lemma 3.7 / App. B, see
  :mod:`explainers._gumbel`; two classes reduce to Bernoulli), Gaussian (mixture of Gaussians with
  the variance-direction tracker). :func:`sampled_value` is the generic shared-noise Monte Carlo
  estimator used when only samples of ``v(S, ε)`` are available.
* **Statistics** (Eq. 6, Sec. 3.1, Prop. 3.9): overall importance ``ι_i = 1 − q_i(0)``, transition
  probabilities ``q_i(e_r − e_s)``, most likely change ``ℓ_mc`` and its classes, entropy, mean
  (= the standard value of the expectation game, Prop. 3.9(i)) and variance.
* **Games from prefstream's models** through plain callables (no import of any learner module):
  :func:`bernoulli_preference_game` from a coalition value function ``ν`` (the Pref-SHAP value
  function of a GPM, or :func:`pairwise_margin_value_function` around any margin ``g``),
  :func:`categorical_choice_game` for a choice among ``k`` shown items (click session),
  :func:`gaussian_utility_game` for a utility with predictive variance, :func:`reference_game` for
  any callable returning probabilities or logits with baseline/reference removal.
* **Result**: :func:`to_explanation` → :class:`explainers._result.Explanation` with method
  ``"distributional-bernoulli" | "distributional-categorical" | "distributional-gaussian"``;
  ``values`` is the mean of the distributional value, ``extra`` the per-player distributions.
  :func:`explain_preference`, :func:`explain_choice` and :func:`explain_gaussian_utility` are the
  one-call entry points for the explainer worker.

Conventions
-----------
Players are indexed ``0..n-1``; a coalition is a boolean row of length ``n``. Discrete values are
stored as a *transition table* ``T[i, s, r] = P(v(S) = s, v(S ∪ i) = r)`` averaged over
``S ~ p^i`` — rows are the *from* class (without ``i``), columns the *to* class (with ``i``). Its
off-diagonal entries are the transition probabilities ``q_i(e_r − e_s)`` of Eq. 7 and its trace is
``q_i(0)``. For Bernoulli games the classes are ``[0, 1]`` and ``ξ_i ∈ {−1, 0, +1}``.
"""

from explainers.distributional.estimators import (bernoulli_values_of_tables, distributional_value, sampled_value,
                                                  standard_value)
from explainers.distributional.families import BernoulliFamily, CategoricalFamily, GaussianFamily, PayoffFamily
from explainers.distributional.games import StochasticGame, table_game
from explainers.distributional.model_games import (bernoulli_preference_game, categorical_choice_game,
                                                   gaussian_utility_game, learner_margin_value_function,
                                                   masked_inputs, pairwise_margin_value_function, product_value_function,
                                                   reference_game, table_value_function)
from explainers.distributional.results import (explain_choice, explain_game, explain_gaussian_utility,
                                               explain_preference, explain_preference_tables, to_explanation)
from explainers.distributional.structures import (Banzhaf, CoalitionStructure, ExplicitCoalitionStructure,
                                                  RandomOrderValue, Semivalue, Shapley, all_coalitions,
                                                  get_structure)
from explainers.distributional.values import DiscreteDistributionalValue, GaussianDistributionalValue

__all__ = [
    # coalition structures (value operators)
    "CoalitionStructure", "Shapley", "Banzhaf", "Semivalue", "RandomOrderValue",
    "ExplicitCoalitionStructure", "get_structure", "all_coalitions",
    # payoff families and games
    "PayoffFamily", "BernoulliFamily", "CategoricalFamily", "GaussianFamily",
    "StochasticGame", "table_game",
    # values and statistics
    "DiscreteDistributionalValue", "GaussianDistributionalValue", "distributional_value",
    "sampled_value", "standard_value", "bernoulli_values_of_tables",
    # games from models
    "masked_inputs", "pairwise_margin_value_function", "learner_margin_value_function",
    "bernoulli_preference_game", "categorical_choice_game", "gaussian_utility_game", "reference_game",
    "table_value_function", "product_value_function",
    # results
    "to_explanation", "explain_game", "explain_preference", "explain_preference_tables", "explain_choice",
    "explain_gaussian_utility",
]
