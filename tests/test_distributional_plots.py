"""Plots of distributional values are fed by the Explanation object (and its JSON record)."""

import numpy as np
import pytest

from explainers._result import Explanation
from explainers.distributional import explain_choice, explain_preference, pairwise_margin_value_function
from explainers.distributional_plots import plot_importance_bars, plot_transition_heatmap
from explainers.exceptions import InvalidInputError


@pytest.fixture
def choice_explanation():
    rng = np.random.default_rng(0)
    items = rng.normal(size=(4, 3))
    return explain_choice(lambda X: X @ np.array([2.0, -1.0, 0.3]), items, feature_names=["p", "q", "r"])


def test_transition_heatmap_shows_the_from_to_table(tmp_path, choice_explanation):
    e = Explanation.from_record(choice_explanation.to_records()[0])  # works from a record too
    path = tmp_path / "heat.png"
    ax = plot_transition_heatmap(e, "q", path=path)
    assert path.stat().st_size > 1000
    img = ax.images[0].get_array()
    T = np.asarray(e.extra["transition"])[1]
    off = ~np.eye(4, dtype=bool)
    assert np.allclose(np.asarray(img)[off], T[off])  # rows = from, columns = to
    assert ax.get_xlabel().startswith("to") and ax.get_ylabel().startswith("from")
    default = plot_transition_heatmap(e)  # most important feature
    assert e.feature_names[int(np.argmax(e.extra["importance"]))] in default.get_title()


def test_importance_bars_with_variance(tmp_path, choice_explanation):
    path = tmp_path / "bars.png"
    ax = plot_importance_bars(choice_explanation, path=path)
    assert path.stat().st_size > 1000
    widths = sorted(p.get_width() for p in ax.patches)
    assert np.allclose(widths, sorted(choice_explanation.values))
    nu = pairwise_margin_value_function(lambda L, R: (L - R) @ np.array([1.0, 2.0]), [1.0, 0.0], [0.0, 1.0])
    plot_importance_bars(explain_preference(nu, ["a", "b"]))


def test_plots_reject_other_explanations():
    e = Explanation(values=[0.1, 0.2], base_values=0.0, feature_names=["a", "b"], method="linear-shapley")
    with pytest.raises(InvalidInputError, match="distributional"):
        plot_importance_bars(e)
    with pytest.raises(InvalidInputError, match="distributional"):
        plot_transition_heatmap(e)
