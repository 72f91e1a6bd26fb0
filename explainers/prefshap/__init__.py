"""Pref-SHAP: Shapley explanations of kernel preference models (GPM, C-GPM, UPM).

Hu, Chau, Ferrando Huertas & Sejdinovic (2022), *Explaining Preferences with Shapley Values*,
Section 3 and Appendix A, with the baselines of Section 4 and Appendix B.

The model explained
-------------------
A generalised preference model (GPM, Section 2.1) with product RBF kernel
k(x, y) = Π_j k_j(x_j, y_j), k_j(a, b) = exp(−(a − b)² / (2 ℓ_j²)) on scaled features and
Nyström centre pairs (c^ℓ_m, c^r_m)::

    g(x^ℓ, x^r) = Σ_m α_m [k(x^ℓ, c^ℓ_m) k(x^r, c^r_m) − k(x^ℓ, c^r_m) k(x^r, c^ℓ_m)]     (k_E, Sec. 2.1)

a C-GPM multiplies each term by k_U(u, u_m), and a UPM is g(a, b) = f(a) − f(b) with
f(x) = Σ_m α_m [k(x, c^ℓ_m) − k(x, c^r_m)].

Preferential value function for items (Definition 3.1, Propositions 3.1–3.2)
---------------------------------------------------------------------------
ν_S(x^ℓ, x^r) = E[g(X^ℓ, X^r) | X^ℓ_S = x^ℓ_S, X^r_S = x^r_S] with the observational reference
p(X^ℓ | X^ℓ_S = x^ℓ_S) p(X^r | X^r_S = x^r_S): the two items are independent draws from the
item distribution conditioned on their own S-features. Because the kernel is a product and the
two items are independent, each kernel factor of k_E is integrated separately::

    E[k(X, c) | X_S = x_S] = k_S(x_S, c_S) · ⟨k_{S^c}(·, c_{S^c}), μ_{X_{S^c} | X_S = x_S}⟩
                           ≈ k_S(x_S, c_S) · Σ_i β_i^S(x) k_{S^c}(X_{i,S^c}, c_{S^c}) =: Γ_S(c, x)

with the conditional-mean-embedding (CME) weights of the item catalog X = {X_i}_{i=1}^n
(the reference sample), β^S(x) = (K_S^{XX} + nλ I)⁻¹ k_S^X(x) (Appendix C, proof of Prop. 3.2).
Then, keeping each of the four cross terms of k_E with its own centre (left item against
left centre, right item against right centre, and the swapped pair)::

    ν̂_S(x^ℓ, x^r) = Σ_m α_m [Γ_S(c^ℓ_m, x^ℓ) Γ_S(c^r_m, x^r) − Γ_S(c^r_m, x^ℓ) Γ_S(c^ℓ_m, x^r)]   (Prop. 3.2)

For S = Ω no embedding is needed (Γ = k(c, x), so ν(Ω) = g exactly); for S = ∅ the CME is the
marginal mean embedding (β_i = 1/n), which makes ν(∅) = 0 by skew-symmetry. Both items share
the same Γ_S(·, x), so ν̂ is skew-symmetric and vanishes on a duel of two identical items.
With ``value_function="interventional"`` (Janzing et al., mentioned in Sec. 3.1) β_i = 1/n
for every S.

Exact product-marginal value function (the stream's default)
-------------------------------------------------------------
With ``value_function="product-marginal"`` each absent feature is integrated out under its own marginal
over the reference catalog (k_j → μ_j, μ_j(c_j) = mean_i k_j(z_ij, c_j); Sec. 3.1's marginal reference):
every term of g is then a product game v(S) = w Π_{j∈S} a_j Π_{j∉S} b_j and its Shapley values have the
closed form φ_i = w (a_i − b_i) ∫_0^1 Π_{j≠i} ((1−s) b_j + s a_j) ds, evaluated exactly by Gauss–Legendre
quadrature: O(T·d²) per duel at any width, nothing enumerated or sampled (:mod:`explainers.prefshap.product`,
:mod:`explainers.prefshap.exact`; docs/prefshap.md).

Preferential value function for contexts (Proposition 3.3)
-----------------------------------------------------------
ν_{S'}(u, x^ℓ, x^r) = Σ_m α_m Γ^U_{S'}(u_m, u) Ξ_m(x^ℓ, x^r), Ξ_m = k(x^ℓ, c^ℓ_m) k(x^r, c^r_m) −
k(x^ℓ, c^r_m) k(x^r, c^ℓ_m), with Γ^U the same CME construction on the context space with a
reference sample of contexts (λ' = ``cme_reg``).

The four tasks of Table 1
-------------------------
:func:`explain_duels` (one duel; ``U`` gives g_u, no ``U`` gives ḡ = E_U g_U for a C-GPM),
:func:`explain_items` (an item against all opponents, value function averaged over opponents),
:func:`explain_duel_contexts` (the context of one duel) and :func:`explain_contexts`
(a context averaged over duels). Baselines: :func:`explain_upm_duels` (SHAP of a UPM's utility,
φ(x^ℓ) − φ(x^r), Section 4) and :func:`explain_concat_duels` (naive concatenation, 2d players,
Section 3.1 and Appendix B).

Shapley values
--------------
Exact enumeration when 2^d ≤ ``max_coalitions``, else unique coalition sampling (Algorithm 2) with
Kernel SHAP weights and Cholesky-solved WLS with the efficiency constraint; players with zero
variance in the explained data are removed (held at their common value in every coalition;
φ = 0), as in Appendix A. See :mod:`explainers._coalitions`.

Linear algebra (Appendix A)
---------------------------
Coalitions are processed in chunks sized to ``max_memory_mb``; for a chunk the masked squared
distances are one batched matmul, the CME systems of all coalitions are solved together
(batched Cholesky, default, or batched preconditioned CG, Algorithm 3) for all unique items at
once, and the values of every explained duel follow from Γ by gathers. Runs on CPU or GPU
(``device``). ``docs/prefshap.md`` records the CG-vs-Cholesky measurement behind the default.
"""

from __future__ import annotations

from explainers.prefshap.api import (explain_concat_duels, explain_contexts, explain_duel_contexts, explain_duels,
                                     explain_items, explain_upm_duels, preferential_value_function)
from explainers.prefshap.engine import _Engine  # noqa: F401
from explainers.prefshap.explainer import PrefSHAP

__all__ = [
    "PrefSHAP",
    "explain_concat_duels",
    "explain_contexts",
    "explain_duel_contexts",
    "explain_duels",
    "explain_items",
    "explain_upm_duels",
    "preferential_value_function",
]
