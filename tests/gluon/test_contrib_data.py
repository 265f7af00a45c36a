"""gluon.contrib.data: Python's own documentation as text, and batches bucketed by length."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybridlab import gluon
from hybridlab.gluon.contrib.data import (
    CharVocab,
    FixedBucketSampler,
    bucket_keys,
    bucket_of,
    pad,
    python_docs,
)


def test_python_docs_is_the_interpreters_own_help_text():
    from pydoc_data.topics import topics

    text = python_docs()
    assert len(text) > 100_000
    assert topics["assert"].strip("\n") in text
    assert gluon.contrib.data.python_docs is python_docs


def test_vocab_round_trip_and_padding_index():
    vocab = CharVocab("hello world")
    assert vocab.idx_to_char[0] == "\x00" and len(vocab) == 1 + len(set("hello world"))
    codes = vocab.encode("hello")
    assert codes.dtype == np.int32 and 0 not in codes
    assert vocab.decode(codes) == "hello"
    assert vocab.decode([*codes, 0, 0]) == "hello"  # padding is dropped
    with pytest.raises(ValueError, match=r"not in the vocabulary: \['z'\]"):
        vocab.encode("hez")


def test_bucket_keys_by_width_and_by_count():
    lengths = [1, 2, 3, 4, 5, 6, 7, 8, 9, 100]
    assert bucket_keys(lengths, 4, "equal width") == (25, 50, 75, 100)
    # equal count: the lengths at the quantiles 1/4, 2/4, 3/4, 1
    assert bucket_keys(lengths, 4, "equal count") == (3, 5, 8, 100)
    assert bucket_keys([5, 5, 5], 3, "equal count") == (5,)  # coinciding keys merge
    with pytest.raises(ValueError, match="spacing 'log'"):
        bucket_keys(lengths, 2, "log")
    with pytest.raises(ValueError, match="num_buckets must be"):
        bucket_keys(lengths, 0)
    with pytest.raises(ValueError, match="lengths must be"):
        bucket_keys([3, 0], 2)


def test_bucket_of_is_the_first_key_at_least_the_length():
    keys = (10, 20, 30)
    assert [bucket_of(n, keys) for n in (1, 10, 11, 20, 30)] == [0, 0, 1, 1, 2]
    with pytest.raises(ValueError, match="longer than the largest bucket key 30"):
        bucket_of(31, keys)


@settings(max_examples=40, deadline=None)
@given(lengths=st.lists(st.integers(1, 60), min_size=1, max_size=80),
       batch=st.integers(1, 9), buckets=st.integers(1, 8),
       spacing=st.sampled_from(["equal width", "equal count"]), shuffle=st.booleans())
def test_every_sample_once_each_batch_from_one_bucket(lengths, batch, buckets, spacing,
                                                      shuffle):
    np.random.seed(1)
    sampler = FixedBucketSampler(lengths, batch, num_buckets=buckets, spacing=spacing,
                                 shuffle=shuffle)
    batches = list(sampler)
    assert len(batches) == len(sampler)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    keys = sampler.bucket_keys
    for b in batches:
        assert 1 <= len(b) <= batch
        key = sampler.batch_key(b)
        assert key in keys and all(lengths[i] <= key for i in b)
        below = keys[keys.index(key) - 1] if keys.index(key) else 0
        assert all(lengths[i] > below for i in b)  # nothing that fits a smaller bucket


def test_discard_drops_each_buckets_short_batch_and_keys_are_checked():
    lengths = [2, 2, 2, 9, 9]
    sampler = FixedBucketSampler(lengths, 2, bucket_keys=[4, 9], last_batch="discard")
    assert list(sampler) == [[0, 1], [3, 4]] and len(sampler) == 2
    assert "5 samples, 2 batches" in str(sampler) and "4: 3, 9: 2" in str(sampler)
    with pytest.raises(ValueError, match="shorter than the longest sample"):
        FixedBucketSampler(lengths, 2, bucket_keys=[4, 8])
    with pytest.raises(ValueError, match="increasing"):
        FixedBucketSampler(lengths, 2, bucket_keys=[9, 4])
    with pytest.raises(ValueError, match="batch_size"):
        FixedBucketSampler(lengths, 0)


def test_pad_to_a_bucket_key_gives_data_and_valid_lengths():
    data, valid = pad([[3, 4], [5], np.array([6, 7, 8])], length=5, value=0)
    assert data.shape == (3, 5) and str(data.dtype) == "int32"
    assert data.asnumpy().tolist() == [[3, 4, 0, 0, 0], [5, 0, 0, 0, 0], [6, 7, 8, 0, 0]]
    assert valid.asnumpy().tolist() == [2.0, 1.0, 3.0]
    assert pad([[1], [1, 2]])[0].shape == (2, 2)  # the longest, by default
    with pytest.raises(ValueError, match="does not fit in length 2"):
        pad([[1, 2, 3]], length=2)
