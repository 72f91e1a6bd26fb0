"""Each data adapter on its real file: row counts from SOURCE.txt, anomalies handled, events well formed."""

import math

import numpy as np
import pytest

from learners.exceptions import InvalidInputError, InvalidParameterError
from stream.adapters import load_dataset, resolve_data_dir
from stream.adapters.mcda import load_mcda


def _finite_events(ds, n=50):
    evs = list(ds.to_events(stop=n))
    for ev in evs:
        for side in ("left", "right"):
            assert all(math.isfinite(v) for v in ev[side]["features"].values())
        assert ev["outcome"] in (1, -1, 0)
    return evs


def test_pokemon_counts_and_types(data_dir):
    ds = load_dataset("pokemon", data_dir=data_dir)
    assert ds.n_items == 800 and len(ds) == 50_000
    assert len(set(ds.left) | set(ds.right)) == 784          # SOURCE.txt: 784 distinct Pokémon appear
    assert abs((ds.outcome == 1).mean() - 0.472) < 0.001      # first wins 47.2 %
    types = ds.item_features[:, ds.feature_names.index("type_Bug"):]
    assert types.sum(axis=1).min() >= 1 and types.sum(axis=1).max() <= 2   # one or two types each
    assert ds.item_ids[62] == "63"                            # row 63 (name filled in this copy) is kept
    _finite_events(ds)


def test_chameleons_and_flatlizards(data_dir):
    ch = load_dataset("chameleons", data_dir=data_dir)
    assert (ch.n_items, len(ch)) == (35, 106)
    fl = load_dataset("flatlizards", data_dir=data_dir)
    assert (fl.n_items, len(fl)) == (77, 100)
    assert np.isfinite(fl.item_features).all()                # NAs (throat/badge PCs, testosterone) imputed
    # contests are recorded winner-first; the adapter randomises sides with a fixed seed
    assert 0.3 < (ch.outcome == 1).mean() < 0.7
    assert np.array_equal(load_dataset("chameleons", data_dir=data_dir).left, ch.left)


def test_tennis_context_and_order(data_dir):
    ds = load_dataset("tennis", data_dir=data_dir)
    assert len(ds) == 14_498 and ds.n_items == 809
    assert ds.context.shape == (14_498, 10)
    assert np.all(ds.context[:, :4].sum(axis=1) == 1)          # one surface per match
    assert np.all(np.diff(ds.timestamps) >= 0)                 # replayed in time order
    assert np.isfinite(ds.item_features).all()
    ev = next(ds.to_events())
    assert set(ev["context"]) == set(ds.context_names)


def test_cems_drops_missing_comparisons(data_dir):
    ds = load_dataset("cems", data_dir=data_dir)
    assert len(ds) == 4545 - 91                               # 91 NA comparisons in SOURCE's table
    assert set(np.unique(ds.outcome)) == {-1, 0, 1}            # ties kept as indifference
    assert ds.context.shape[1] == 8


def test_train_is_bundled_and_inline():
    ds = load_dataset("train")
    assert len(ds) == 2929 and (ds.outcome == 1).sum() == 1474
    assert ds.inline and list(ds.item_records()) == []
    assert ds.criteria_directions == {"price": -1, "time": -1, "change": -1, "comfort": -1}
    _finite_events(ds)


def test_open_bandit_sessions():
    log = load_dataset("open_bandit")  # the six obp samples, 287 clicks (an item clicked twice in a session counts once)
    assert 280 <= sum(len(s["clicked"]) for s in log.sessions) <= 287
    pairs = log.to_pairs()
    n_expected = sum(len(s["clicked"]) * (len(s["shown"]) - len(s["clicked"])) for s in log.sessions)
    assert len(pairs) == n_expected and (pairs.outcome == 1).all()
    rec = next(log.click_sessions())
    assert {"session_id", "shown", "clicked", "context"} <= set(rec)


def test_mcda_sets_and_mpg_direction(data_dir):
    X, rank, crit, meta = load_mcda("mpg", data_dir)
    assert X.shape == (392, 7) and X.min() >= 0 and X.max() <= 1
    # after flipping c1-c4 the share of dominance-comparable pairs violating monotonicity is ~0.1 %
    dom = (X[:, None, :] >= X[None, :, :]).all(-1) & (X[:, None, :] != X[None, :, :]).any(-1)
    viol = dom & (rank[:, None] > rank[None, :])
    assert viol.sum() / dom.sum() < 0.005
    ds = load_dataset("mcda-esl", data_dir=data_dir)
    assert 0.45 < (ds.outcome == 1).mean() < 0.55


def test_errors_are_clear(tmp_path):
    with pytest.raises(InvalidParameterError, match="Unknown data set"):
        load_dataset("nope")
    with pytest.raises(InvalidInputError, match="--data-dir"):
        resolve_data_dir(tmp_path, "definitely_missing_set")


@pytest.mark.parametrize("name", ["train", "chameleons", "tennis", "cems", "mcda-esl", "pokemon"])
def test_events_pass_the_contract(name, request):
    """Clean data produce no dead letters: every event parses under the contract."""
    import json

    from stream.contract import parse_preference

    ds = load_dataset(name, data_dir=None if name == "train" else request.getfixturevalue("data_dir"))
    n = min(len(ds), 3000)
    for ev in ds.to_events(stop=n):
        ex = parse_preference(json.dumps(ev).encode())
        assert ex.outcome == ev["outcome"]
        assert set(ex.left) == set(ds.feature_names)


def test_click_sessions_pass_the_contract():
    import json

    from stream.contract import parse_click_session

    log = load_dataset("open_bandit")
    total = sum(len(parse_click_session(json.dumps(rec).encode())) for rec in log.click_sessions())
    assert total == len(log.to_pairs())
