"""The bucket explorer's model (hybridlab/lab/buckets.py) and its view."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybridlab.gluon.contrib.data import FixedBucketSampler
from hybridlab.lab.buckets import WAYS, BucketModel, Costs, LineCost

# unrolled: a compile grows with T; foreach: a compile is cheap and flat
COSTS = {"unrolled": Costs(LineCost(0.05, 0.01), LineCost(0.001, 0.0002)),
         "foreach": Costs(LineCost(0.01, 0.0), LineCost(0.0015, 0.0002))}


def test_line_cost_fits_measured_points_and_never_goes_negative():
    line = LineCost.fit([8, 16, 32], [0.1 + 0.01 * t for t in (8, 16, 32)])
    assert line.base == pytest.approx(0.1) and line.per_step == pytest.approx(0.01)
    assert line.at(64) == pytest.approx(0.74)
    assert LineCost.fit([5, 5], [1.0, 3.0]) == LineCost(2.0, 0.0)
    assert LineCost(-1.0, 0.001).at(10) == 0.0
    with pytest.raises(ValueError, match="one time per length"):
        LineCost.fit([1, 2], [0.1])


def test_numbers_by_hand():
    # lengths 1, 2, 3, 10 in buckets keyed 3 and 10: tokens computed 3 * 3 + 10 = 19
    model = BucketModel([1, 2, 3, 10], COSTS, keys=(3, 10), batch_size=2)
    numbers = model.numbers()
    assert model.counts() == [3, 1] and numbers["programs"] == 2
    assert numbers["padding"] == pytest.approx(1 - 16 / 19)
    unrolled = COSTS["unrolled"]
    assert numbers["compile_s"] == pytest.approx(unrolled.compile.at(3) + unrolled.compile.at(10))
    # ceil(3 / 2) = 2 batches at key 3, one at key 10
    assert numbers["batches"] == 3
    assert numbers["epoch_s"] == pytest.approx(2 * unrolled.step.at(3) + unrolled.step.at(10))
    assert numbers["first_epoch_s"] == pytest.approx(numbers["compile_s"] + numbers["epoch_s"])
    assert "keys [3, 10]: 2 programs compiled, 15.8% of the tokens are padding" in model.summary()


def test_an_empty_bucket_compiles_nothing():
    model = BucketModel([1, 1, 9], COSTS, keys=(2, 5, 9))
    assert model.counts() == [2, 0, 1] and model.numbers()["programs"] == 2


@settings(max_examples=40, deadline=None)
@given(lengths=st.lists(st.integers(1, 80), min_size=1, max_size=60),
       buckets=st.integers(1, 12), spacing=st.sampled_from(["equal width", "equal count"]),
       batch=st.integers(1, 16))
def test_model_agrees_with_the_sampler(lengths, buckets, spacing, batch):
    """The model counts what FixedBucketSampler draws: its batches and their keys."""
    model = BucketModel(lengths, COSTS, buckets, spacing, batch_size=batch)
    sampler = FixedBucketSampler(lengths, batch, num_buckets=buckets, spacing=spacing)
    assert model.bucket_keys() == sampler.bucket_keys
    batches = list(sampler)
    numbers = model.numbers()
    assert numbers["batches"] == len(batches)
    assert numbers["programs"] == len({sampler.batch_key(b) for b in batches})
    computed = sum(sampler.batch_key(b) * len(b) for b in batches)
    assert numbers["padding"] == pytest.approx(1 - sum(lengths) / computed)
    assert 0 <= numbers["padding"] < 1


@settings(max_examples=30, deadline=None)
@given(lengths=st.lists(st.integers(1, 80), min_size=2, max_size=60))
def test_one_bucket_per_length_wastes_nothing_and_one_bucket_compiles_once(lengths):
    everyone = BucketModel(lengths, COSTS, keys=tuple(sorted(set(lengths))))
    assert everyone.numbers()["padding"] == 0
    assert everyone.numbers()["programs"] == len(set(lengths))
    single = BucketModel(lengths, COSTS, keys=(max(lengths),))
    assert single.numbers()["programs"] == 1
    assert single.numbers()["padding"] >= everyone.numbers()["padding"]


def test_cheap_compiles_favour_more_buckets():
    lengths = [1 + (i * 37) % 120 for i in range(3000)]
    unrolled = BucketModel(lengths, COSTS, way="unrolled")
    cheap = BucketModel(lengths, COSTS, way="foreach")
    assert cheap.best() > unrolled.best()
    curve = unrolled.curve(8)
    assert [k for k, _ in curve] == list(range(1, 9))
    assert curve[0][1]["padding"] > curve[-1][1]["padding"]  # more buckets, less padding


def test_bad_settings_are_explained():
    with pytest.raises(ValueError, match="costs for each way"):
        BucketModel([1, 2], {"unrolled": COSTS["unrolled"]})
    with pytest.raises(ValueError, match="way 'scan'"):
        BucketModel([1, 2], COSTS, way="scan")
    with pytest.raises(ValueError, match="end at a length >= the longest sequence"):
        BucketModel([1, 20], COSTS, keys=(5, 10))
    with pytest.raises(ValueError, match="at least one sequence length"):
        BucketModel([], COSTS)
    assert set(WAYS) == set(COSTS)


def test_explorer_controls_change_the_numbers_and_the_picture():
    pytest.importorskip("ipywidgets")
    from hybridlab.viz.buckets import bucket_explorer

    lengths = [1 + (i * 37) % 120 for i in range(500)]
    explorer = bucket_explorer(lengths, COSTS, buckets=4)
    before, png = explorer.summary(), explorer.snapshot_png()
    assert "4 programs compiled" in before and png.startswith(b"\x89PNG")
    explorer.buckets.value = 9
    assert "9 programs compiled" in explorer.summary()
    assert explorer.snapshot_png() != png
    explorer.way.value = "foreach"
    assert "foreach" in explorer.summary()
    bundle = explorer._repr_mimebundle_()
    assert set(bundle) >= {"text/plain", "image/png"}
    assert math.isclose(explorer.model.numbers()["padding"],
                        BucketModel(lengths, COSTS, 9).numbers()["padding"])
