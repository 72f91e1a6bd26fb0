"""learners.state: snapshots store incompressible arrays as they are, deflate the rest, and load back exactly."""

from __future__ import annotations

import io
import zipfile

import numpy as np

from learners.state import dump_state, load_state


def test_incompressible_arrays_are_stored_compressible_ones_deflated_and_both_load_back_exactly():
    rng = np.random.default_rng(0)
    state = {"meta": {"n": 3}, "arrays": {"noise": rng.normal(size=(256, 26)), "stats": rng.integers(0, 200, size=(3000, 26)).astype(float),
                                          "small": rng.normal(size=5), "ints": np.arange(10)}}
    data = dump_state(state)
    kinds = {i.filename: i.compress_type for i in zipfile.ZipFile(io.BytesIO(data)).infolist()}
    assert kinds == {"__meta__.npy": zipfile.ZIP_DEFLATED, "noise.npy": zipfile.ZIP_STORED,
                     "stats.npy": zipfile.ZIP_DEFLATED, "small.npy": zipfile.ZIP_DEFLATED, "ints.npy": zipfile.ZIP_DEFLATED}
    back = load_state(data)
    assert back["meta"] == {"n": 3} and set(back["arrays"]) == set(state["arrays"])
    for k, a in state["arrays"].items():
        np.testing.assert_array_equal(back["arrays"][k], a)
        assert back["arrays"][k].dtype == a.dtype
    assert len(data) < 0.5 * sum(a.nbytes for a in state["arrays"].values())  # the stats still deflate
