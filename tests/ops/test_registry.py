"""The registry's rules: attributes, names, reshape codes, MXNet shapes, teaching errors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybridlab.errors import (
    AttributeValueError,
    ShapeError,
    UnknownAttributeError,
    UnknownOperatorError,
)
from hybridlab.ops import COMPOSITES, OPS, Aval, Kind, OpDef, RunContext, eager, get, registry
from hybridlab.ops.registry import ATTR_TYPES, DUNDERS, split_arguments
from hybridlab.ops.shape import reshape_codes

X23 = np.arange(6, dtype=np.float32).reshape(2, 3)


# --- attributes -------------------------------------------------------------------------

def test_attribute_typo_suggests_the_right_name():
    with pytest.raises(UnknownAttributeError, match=r"sum: unknown attribute 'keepdim'.*did you "
                                                    r"mean 'keepdims'"):
        get("sum").parse_attrs({"keepdim": True})


def test_unknown_attribute_is_a_type_error_like_mxnet():
    with pytest.raises(TypeError, match="known attributes: axis, exclude, keepdims"):
        eager.sum(X23, foo=1)


@pytest.mark.parametrize("op, attrs, message", [
    ("Reshape", {"shape": "two"}, r"'shape' must be of type shape"),
    ("sum", {"keepdims": "maybe"}, r"'keepdims' must be of type bool"),
    ("_plus_scalar", {"scalar": True}, r"'scalar' must be of type float"),
    ("expand_dims", {"axis": 1.5}, r"'axis' must be of type int"),
    ("LeakyReLU", {"act_type": "swish"}, r"'act_type' must be one of \['leaky', 'elu', 'selu'"),
    ("Cast", {"dtype": "float33"}, r"'dtype' must be of type dtype"),
])
def test_wrong_attribute_types_are_rejected(op, attrs, message):
    with pytest.raises(AttributeValueError, match=message):
        get(op).parse_attrs(attrs)


def test_missing_required_attribute_names_it():
    with pytest.raises(AttributeValueError, match=r"FullyConnected: missing required .*"
                                                  r"num_hidden"):
        get("FullyConnected").parse_attrs({})


@pytest.mark.parametrize("op, raw, expected", [
    ("Reshape", {"shape": "(2, 2)"}, {"shape": (2, 2), "reverse": False, "target_shape": (),
                                      "keep_highest": False}),
    ("Reshape", {"shape": "[0, -1]", "reverse": "True"}, {"shape": (0, -1), "reverse": True,
                                                          "target_shape": (),
                                                          "keep_highest": False}),
    ("sum", {"axis": "None", "keepdims": "False"}, {"axis": None, "keepdims": False,
                                                     "exclude": False}),
    ("sum", {"axis": "1"}, {"axis": 1, "keepdims": False, "exclude": False}),
    ("sum", {"axis": "(0, 2)", "keepdims": "1"}, {"axis": (0, 2), "keepdims": True,
                                                  "exclude": False}),
    ("_mul_scalar", {"scalar": "0.5"}, {"scalar": 0.5}),
    ("slice", {"begin": "(None, 1)", "end": "(2, None)"},
     {"begin": (None, 1), "end": (2, None), "step": ()}),
    ("slice_axis", {"axis": "0", "begin": "1", "end": "None"}, {"axis": 0, "begin": 1,
                                                                 "end": None}),
    ("Cast", {"dtype": np.float16}, {"dtype": "float16"}),
    ("Concat", {"dim": "1", "num_args": "2"}, {"dim": 1, "num_args": 2}),
])
def test_json_string_forms_parse(op, raw, expected):
    assert get(op).parse_attrs(raw) == expected


def test_every_attribute_has_a_known_type():
    for op in OPS.values():
        for name, spec in op.attrs.items():
            assert spec.type in ATTR_TYPES, f"{op.name}.{name}: {spec.type}"


# --- names, positional attributes, front ends ------------------------------------------

def test_unknown_operator_suggests_close_names():
    with pytest.raises(UnknownOperatorError, match=r"unknown operator 'broadcast_ad'.*"
                                                   r"'broadcast_add'"):
        get("broadcast_ad")


@pytest.mark.parametrize("name", [
    "broadcast_add", "elemwise_add", "_plus", "_Plus", "elemwise_sub", "elemwise_mul",
    "elemwise_div", "_rminus_scalar", "_rdiv_scalar", "_rpower_scalar", "_maximum_scalar",
    "Reshape", "reshape", "Flatten", "flatten", "transpose", "expand_dims", "Concat", "concat",
    "SliceChannel", "split", "slice", "slice_axis", "broadcast_to", "broadcast_axes", "Cast",
    "cast", "FullyConnected", "Convolution", "Pooling", "dot", "batch_dot", "add_n",
    "ElementWiseSum", "LeakyReLU", "sigmoid", "softmax", "log_softmax", "Activation",
    "Dropout", "random_normal", "random_uniform", "_random_normal", "normal", "uniform",
    "zeros", "ones", "_zeros", "_full", "full", "arange", "one_hot", "pick", "take",
    "zeros_like", "ones_like", "identity", "_copy", "where", "clip", "maximum", "minimum",
    "power", "add", "subtract", "multiply", "divide", "sum_axis", "argmax", "norm", "stack",
    "Embedding", "broadcast_greater", "broadcast_lesser_equal",
])
def test_mxnet_names_resolve(name):
    assert hasattr(eager, name)


def test_dotted_aliases_make_sub_namespaces():
    assert eager.random.normal(shape=(2, 2)).asnumpy().shape == (2, 2)
    assert eager.random.uniform(0, 1, (3,)).asnumpy().shape == (3,)


def test_dunders_name_registered_ops():
    for tensor_op, scalar_op, _ in DUNDERS.values():
        assert get(tensor_op).kind == Kind.BROADCAST
        assert get(scalar_op).attrs["scalar"].type == "float"


def test_positional_arguments_after_the_inputs_fill_attributes_in_order():
    inputs, attrs = split_arguments(get("clip"), (X23, 0, 1), {})
    assert len(inputs) == 1 and attrs == {"a_min": 0, "a_max": 1}
    assert eager.sum(X23, 1).asnumpy().tolist() == [3.0, 12.0]
    assert eager.ones((1, 1)).asnumpy().tolist() == [[1.0]]
    assert eager.arange(1, 7, 2).asnumpy().tolist() == [1.0, 3.0, 5.0]
    assert eager.full((2,), 3).asnumpy().tolist() == [3.0, 3.0]


def test_too_many_positionals_or_the_same_attribute_twice_are_type_errors():
    with pytest.raises(TypeError, match="got 3 positional"):
        split_arguments(get("relu"), (X23, 1, 2), {})
    with pytest.raises(TypeError, match="'axis' both by position and by keyword"):
        split_arguments(get("sum"), (X23, 1), {"axis": 0})


def test_optional_bias_input_depends_on_no_bias():
    fully_connected = get("FullyConnected")
    assert fully_connected.input_names({"no_bias": True}) == ("data", "weight")
    assert fully_connected.input_names({"no_bias": False}) == ("data", "weight", "bias")


def test_split_output_count_comes_from_attributes():
    op = get("split")
    assert op.output_count(op.parse_attrs({"num_outputs": 3})) == 3
    parts = eager.split(np.zeros((2, 6), np.float32), num_outputs=3)
    assert [p.asnumpy().shape for p in parts] == [(2, 2)] * 3


def test_random_ops_are_not_pure_and_others_declare_it():
    assert not get("_random_normal").pure and not get("_dropout_mask").pure
    assert get("broadcast_add").pure


def test_scalar_front_ends_accept_a_number_on_either_side():
    x = eager.Tensor(X23)
    np.testing.assert_array_equal(eager.maximum(2, x).asnumpy(), np.maximum(2, X23))
    np.testing.assert_array_equal(eager.subtract(10, x).asnumpy(), 10 - X23)
    # two numbers give a number, as MXNet's front ends do (comparisons 1 or 0)
    assert eager.maximum(1, 2) == 2 and eager.power(0.5, 2) == 0.25
    assert eager.greater(3, 2) == 1 and type(eager.greater(3, 2)) is int


def test_tensor_dunders_use_registry_ops():
    x = eager.Tensor(X23 + 1)
    np.testing.assert_allclose((2 / x).asnumpy(), 2 / (X23 + 1))
    np.testing.assert_allclose((2 ** x).asnumpy(), 2 ** (X23 + 1))
    np.testing.assert_array_equal((x % 2).asnumpy(), (X23 + 1) % 2)
    assert (x >= 3).asnumpy().dtype == np.float32  # 0/1 in the input's dtype, not bool


def test_activation_rejects_an_unknown_type():
    with pytest.raises(AttributeValueError, match="'act_type' must be one of .*got 'swish'"):
        eager.Activation(X23, act_type="swish")


# --- reshape codes ----------------------------------------------------------------------

@pytest.mark.parametrize("shape_in, codes, reverse, expected", [
    ((2, 3, 4), (4, 0, 2), False, (4, 3, 2)),
    ((2, 3, 4), (2, 0, 0), False, (2, 3, 4)),
    ((2, 3, 4), (6, 1, -1), False, (6, 1, 4)),
    ((2, 3, 4), (3, -1, 8), False, (3, 1, 8)),
    ((2, 3, 4), (-1,), False, (24,)),
    ((2, 3, 4), (-2,), False, (2, 3, 4)),
    ((2, 3, 4), (2, -2), False, (2, 3, 4)),
    ((2, 3, 4), (-2, 1, 1), False, (2, 3, 4, 1, 1)),
    ((2, 3, 4), (-3, 4), False, (6, 4)),
    ((2, 3, 4, 5), (-3, -3), False, (6, 20)),
    ((2, 3, 4), (0, -3), False, (2, 12)),
    ((2, 3, 4), (-3, -2), False, (6, 4)),
    ((2, 3, 4), (-4, 1, 2, -2), False, (1, 2, 3, 4)),
    ((2, 3, 4), (2, -4, -1, 3, -2), False, (2, 1, 3, 4)),
    ((10, 5, 4), (-1, 0), False, (40, 5)),
    ((10, 5, 4), (-1, 0), True, (50, 4)),
    ((16, 6, 4, 4), (0, -1), False, (16, 96)),
])
def test_reshape_codes_follow_mxnet(shape_in, codes, reverse, expected):
    assert reshape_codes(shape_in, codes, reverse) == expected
    out = eager.reshape(np.zeros(shape_in, np.float32), shape=codes, reverse=reverse)
    assert out.asnumpy().shape == expected


@pytest.mark.parametrize("shape_in, codes, why", [
    ((2, 3, 4), (-1, -1), "only one -1 is allowed"),
    ((2, 3, 4), (5, -1), "24 elements cannot be split evenly"),
    ((2, 3), (0, 0, 0), "code 0 at position 2 has no input dimension left"),
    ((2, 3), (-3, -3), "code -3 at position 1 has no input dimension left"),
    ((2, 3, 4), (-4, 3, 3, -2), "-4 cannot split 2 into (3, 3)"),
    ((2, 3, 4), (-4, -1, 3, -2), "-4 cannot split 2 into (-1, 3)"),
    ((2, 3, 4), (-4, -1, 0), "-4 must be followed by two sizes"),
    ((2, 3, 4), (-4, 2), "-4 must be followed by two sizes"),
    ((2, 3), (7,), "6 elements do not fit in"),
    ((2, 3), (-5, 6), "unknown code -5"),
])
def test_reshape_errors_name_both_shapes_and_explain_the_codes(shape_in, codes, why):
    with pytest.raises(ShapeError) as info:
        eager.reshape(np.zeros(shape_in, np.float32), shape=codes)
    message = str(info.value)
    assert why in message
    assert f"Reshape: cannot reshape {shape_in} to {codes}" in message
    assert "-2 copies all remaining dimensions" in message


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=4), st.data())
def test_reshape_with_one_inferred_dimension_keeps_the_size(shape, data):
    shape = tuple(shape)
    keep = data.draw(st.integers(0, len(shape) - 1))
    codes = (0,) * keep + (-1,)
    out = reshape_codes(shape, codes)
    assert out[:keep] == shape[:keep] and int(np.prod(out)) == int(np.prod(shape))


# --- MXNet shapes -----------------------------------------------------------------------

def test_reductions_to_a_single_number_have_shape_1():
    x = np.ones((2, 3), np.float32)
    assert eager.sum(x).asnumpy().shape == (1,)
    assert eager.mean(x, axis=(0, 1)).asnumpy().shape == (1,)
    assert eager.max(np.ones(4, np.float32), axis=0).asnumpy().shape == (1,)
    assert eager.argmax(x).asnumpy().shape == (1,)
    assert eager.dot(np.ones(3), np.ones(3)).asnumpy().shape == (1,)
    assert eager.sum(x, keepdims=True).asnumpy().shape == (1, 1)
    assert eager.sum(x, axis=()).asnumpy().shape == (1,)  # MXNet: () means all axes


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 3), min_size=1, max_size=4), st.data())
def test_reduction_infer_agrees_with_numpy(shape, data):
    axes = data.draw(st.lists(st.integers(0, len(shape) - 1), unique=True, max_size=len(shape)))
    keepdims = data.draw(st.booleans())
    x = np.ones(shape, np.float32)
    expected = np.sum(x, axis=tuple(axes) or None, keepdims=keepdims).shape or (1,)
    got = get("sum").infer(Aval(tuple(shape), x.dtype), axis=tuple(axes) or None,
                           keepdims=keepdims, exclude=False)
    assert got[0].shape == expected


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([1, 3]), max_size=3), st.lists(st.sampled_from([1, 3]),
                                                             min_size=1, max_size=3))
def test_broadcast_infer_agrees_with_numpy(left, right):
    a, b = np.ones(left or (1,), np.float32), np.ones(right, np.float32)
    assert eager.broadcast_mul(a, b).asnumpy().shape == np.broadcast_shapes(a.shape, b.shape)


# --- errors that teach ------------------------------------------------------------------

@pytest.mark.parametrize("call, pattern", [
    (lambda: eager.broadcast_add(X23, np.ones(4, np.float32)),
     r"broadcast_add: shapes \(2, 3\) and \(4,\) cannot be broadcast.*broadcast_to"),
    (lambda: eager.dot(X23, X23),
     r"dot: the last axis of lhs \(2, 3\) must match the first axis of rhs \(2, 3\).*"
     r"transpose_b=True"),
    (lambda: eager.FullyConnected(X23, np.ones((4, 2)), np.ones(4), num_hidden=4),
     r"FullyConnected: data \(2, 3\).*needs weight \(4, 3\).*got weight \(4, 2\)"),
    (lambda: eager.Convolution(np.ones((1, 2, 5, 5)), np.ones((3, 1, 3, 3)), np.ones(3),
                               kernel=(3, 3), num_filter=3),
     r"Convolution: data \(1, 2, 5, 5\) needs weight \(3, 2, 3, 3\)"),
    (lambda: eager.concat(X23, np.ones((3, 3), np.float32), dim=1),
     r"concat: cannot join shapes \[\(2, 3\), \(3, 3\)\] along dim 1"),
    (lambda: eager.sum(X23, axis=2),
     r"sum: axis 2 is out of range for an input of shape \(2, 3\)"),
    (lambda: eager.split(X23, num_outputs=2),
     r"split: cannot split shape \(2, 3\) into 2 equal parts along axis 1"),
    (lambda: eager.batch_dot(X23, X23), r"batch_dot: needs two 3-D inputs"),
    (lambda: eager.broadcast_to(X23, shape=(4, 3, 2)), r"broadcast_to: cannot broadcast shape "
                                                        r"\(2, 3\) to \(4, 3, 2\)"),
    (lambda: eager.transpose(X23, axes=(0, 0)), r"transpose: axes \(0, 0\) are not a "
                                                r"permutation"),
    (lambda: eager.Pooling(np.ones((1, 1, 2, 2)), kernel=(3, 3)),
     r"Pooling: a window of 3 .* does not fit an input of 2"),
    (lambda: eager.pick(X23, np.zeros(3, np.float32)), r"pick: index shape \(3,\) does not "
                                                       r"match data shape \(2, 3\)"),
    (lambda: eager.slice(X23, begin=(0,), end=(2,), step=(0,)), r"slice: begin \(0,\), end "
                                                                 r"\(2,\), step \(0,\) do not fit"),
    (lambda: eager.Pooling(np.ones((1, 1, 4, 4)), kernel=(2, 2), stride=2),
     r"Pooling: stride=\(2,\) needs one value per axis of the kernel \(2, 2\), e\.g\. "
     r"stride=\(2, 2\)"),
    (lambda: eager.concat(X23, X23, num_args=3), r"concat: num_args=3 but 2 inputs"),
    (lambda: eager.Deconvolution(np.ones((1, 2, 3, 3)), np.ones((3, 1, 2, 2)), kernel=(2, 2),
                                 num_filter=1), r"Deconvolution: data NCW/NCHW/NCDHW "
                                                r"\(1, 2, 3, 3\) with kernel \(2, 2\) needs "
                                                r"weight \(2, 1, 2, 2\)"),
    (lambda: eager.LeakyReLU(X23, np.ones(4, np.float32), act_type="prelu"),
     r"LeakyReLU: prelu's gamma \(4,\) fits neither data \(2, 3\)'s channels"),
    (lambda: eager.linalg.gemm2(X23, X23.T, axis=-1), r"linalg\.gemm2: axis=-1 must be an "
                                                       r"axis of shape \(2, 3\) other than"),
    (lambda: eager.reshape_like(X23, X23, lhs_begin=3), r"reshape_like: lhs_begin=3, "
                                                        r"lhs_end=None do not fit the 2 axes"),
    (lambda: eager.zeros(shape=(2, -1)), r"_zeros: shape \(2, -1\) is not a valid array shape"),
    (lambda: eager.random.normal(shape=()), r"_random_normal: shape \(\) is not a valid"),
    (lambda: eager.one_hot(np.zeros(2, np.float32), depth=0), r"one_hot: depth=0 must be"),
    (lambda: eager.sum_like(np.ones(4, np.float32), np.ones((1, 4), np.float32)),
     r"sum_like: shape \(1, 4\) does not broadcast to \(4,\)"),
    (lambda: eager.broadcast_axis(X23, axis=4, size=2), r"broadcast_axis: axis 4 and size "
                                                         r"\(2,\) do not fit shape \(2, 3\)"),
    (lambda: eager.Convolution(np.ones((1, 3, 3)), np.ones((1, 1, 1, 1)), np.ones(1),
                               kernel=(1, 1), num_filter=1),
     r"Convolution: needs data NCW, NCHW or NCDHW with a kernel of one size per"),
    (lambda: eager.Pooling(np.ones((1, 1, 4, 4)), kernel=(2, 2), pooling_convention="same"),
     r"Pooling: pooling_convention='same' is MXNet's 1-D max pooling"),
])
def test_shape_errors_name_the_op_and_the_shapes(call, pattern):
    with pytest.raises(ShapeError, match=pattern):
        call()


def test_a_reversed_sampling_range_is_rejected_when_the_kernel_runs():
    with pytest.raises(AttributeValueError, match="low=6 must be less than or equal to high=5"):
        eager.random.randint(6, 5, (2,))


def test_dropout_axes_share_one_draw_along_them():
    mask = _dropout_mask(np.ones((4, 50), np.float32), 0.5, training=True, axes=(1,))
    assert mask.shape == (4, 1)
    rows = eager.broadcast_mul(np.ones((4, 50), np.float32), mask).asnumpy()
    assert all(len(set(row)) == 1 for row in rows)


def test_dropout_probability_must_be_between_zero_and_one():
    with pytest.raises(AttributeValueError, match=r"Dropout: attribute .p. must be >= 0 and <= 1"):
        eager.Dropout(X23, p=1.5)


def test_reshape_to_a_single_element_never_makes_a_0d_array():
    assert reshape_codes((1, 1), ()) == (1,)


def test_shape_errors_are_value_errors_like_mxnet():
    assert issubclass(ShapeError, ValueError)


def test_eager_catches_a_kernel_that_disagrees_with_its_shape_rule():
    liar = OpDef(name="liar", kernel=lambda x: x.sum(0), infer=lambda x: [x], grad=None,
                 kind=Kind.OPAQUE)
    with pytest.raises(RuntimeError, match="liar: the kernel returned .* but infer promised"):
        eager.apply_eagerly(liar, [X23], {})


# --- numerics and randomness ------------------------------------------------------------

def test_stable_activations_do_not_overflow():
    x = np.array([-1000.0, 0.0, 1000.0], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an overflow warning would fail the test
        np.testing.assert_allclose(eager.sigmoid(x).asnumpy(), [0, 0.5, 1])
        np.testing.assert_allclose(eager.softrelu(x).asnumpy(), [0, np.log(2), 1000])
        np.testing.assert_allclose(eager.log_softmax(x).asnumpy(), [-2000, -1000, 0])
        np.testing.assert_allclose(eager.softmax(x).asnumpy(), [0, 0, 1])


def test_sigmoid_gradient_stays_finite_far_from_zero():
    x = eager.Tensor(np.array([-1000.0, 1000.0]))
    out = eager.sigmoid(x)
    grads = get("sigmoid").grad(eager, [x], [out], [eager.Tensor(np.ones(2))])
    assert np.all(np.isfinite(grads[0].asnumpy()))


def _dropout_mask(x, p, training, seed=0, mode="training", axes=()):
    rt = RunContext(training=training, rng=np.random.default_rng(seed))
    return get("_dropout_mask").kernel(x, p=p, mode=mode, axes=axes, rt=rt)


def test_dropout_drops_and_rescales_only_while_training():
    x = np.ones((200, 50), np.float32)
    mask = _dropout_mask(x, 0.3, training=True)
    assert set(np.unique(mask)) == {0.0, np.float32(1 / 0.7)}
    assert abs((mask == 0).mean() - 0.3) < 0.02
    np.testing.assert_array_equal(_dropout_mask(x, 0.3, training=False), 1)
    assert (_dropout_mask(x, 0.3, training=False, mode="always") == 0).any()
    np.testing.assert_array_equal(_dropout_mask(x, 0.3, True, seed=5),
                                  _dropout_mask(x, 0.3, True, seed=5))


def test_random_ops_draw_from_the_generator_they_are_given():
    op = get("_random_normal")
    attrs = op.parse_attrs({"shape": (3,), "loc": 1.0})
    draws = [op.kernel(rt=RunContext(rng=np.random.default_rng(seed)), **attrs)
             for seed in (7, 7, 8)]
    np.testing.assert_array_equal(draws[0], draws[1])
    assert not np.array_equal(draws[0], draws[2])
    assert draws[0].dtype == np.float32


def test_every_composite_takes_a_name():
    import inspect

    for comp in COMPOSITES.values():
        assert "name" in inspect.signature(comp.fn).parameters, comp.name


# --- the kernel contract: every kernel returns the dtype its shape rule promises ---------

def _contract_rows():
    from test_registry_table import ROWS  # the one table of inputs for every op

    return [pytest.param(row, dtype, id=f"{row.id}-{dtype}")
            for row in ROWS for dtype in ("int32", "float16", "float64")]


@pytest.mark.parametrize("row, dtype", _contract_rows())
def test_kernels_return_the_promised_dtype(row, dtype):
    """``eager`` compares each result with ``infer`` and raises on any difference, so the
    engine, the reference interpreter and generated code never need to cast."""
    from test_registry_table import _inputs

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # log of negative ints and the like
        getattr(eager, row.op)(*_inputs(row, np.dtype(dtype)), **row.attrs)


@pytest.mark.parametrize("left, right, expected", [
    ("int32", "float32", "float32"), ("float16", "int64", "float16"),
    ("int8", "int32", "int32"), ("float16", "float32", "float32"), ("bool", "float16", "float16"),
])
def test_integers_meeting_floats_take_the_float_type_like_mxnet(left, right, expected):
    a, b = np.ones((2, 3), left), np.full((2, 3), 2, right)
    for op in ("broadcast_add", "broadcast_mul", "broadcast_div", "broadcast_greater"):
        assert getattr(eager, op)(a, b).data.dtype == np.dtype(expected), op
    product = eager.dot(a, b.T)
    assert product.data.dtype == np.dtype(expected)
    fc = eager.FullyConnected(a, b, np.zeros(2, right), num_hidden=2)
    assert fc.data.dtype == np.dtype(expected)
    joined = eager.concat(a, b, dim=0)  # concat promotes like the binary ops
    assert joined.data.dtype == np.dtype(expected)
    assert get("concat").infer(Aval(a.shape, a.dtype), Aval(b.shape, b.dtype),
                               dim=0, num_args=0)[0].dtype == np.dtype(expected)


def test_integer_maths_truncates_into_the_integer_dtype():
    x = np.arange(6, dtype=np.int32)
    np.testing.assert_array_equal(eager.sqrt(x).data, [0, 1, 1, 1, 2, 2])
    np.testing.assert_array_equal(eager._div_scalar(x, scalar=2.5).data, [0, 0, 1, 1, 2, 2])
    np.testing.assert_array_equal(eager._rpower_scalar(x - 2, scalar=2.0).data,
                                  [0, 0, 1, 2, 4, 8])
    out = np.empty(6, np.int32)
    assert get("sqrt").kernel_out(x, out=out) is out  # the out= form agrees
    np.testing.assert_array_equal(out, [0, 1, 1, 1, 2, 2])


# --- attribute ranges ---------------------------------------------------------------------

@pytest.mark.parametrize("op, attrs, message", [
    ("FullyConnected", {"num_hidden": "-4"}, r"'num_hidden' must be >= 1, got '-4'"),
    ("FullyConnected", {"num_hidden": "0"}, r"'num_hidden' must be >= 1"),
    ("FullyConnected", {"num_hidden": "9" * 40}, r"out of the int64 range"),
    ("Convolution", {"kernel": (3, 3), "num_filter": -2}, r"'num_filter' must be >= 1"),
    ("Convolution", {"kernel": "(3, 0)", "num_filter": 2}, r"every entry of attribute 'kernel'"),
    ("Convolution", {"kernel": (3, 3), "num_filter": 2, "pad": (-1, 0)}, r"'pad' must be >= 0"),
    ("Pooling", {"kernel": (2, 2), "stride": (0, 1)}, r"'stride' must be >= 1"),
    ("add_n", {"num_args": -1}, r"'num_args' must be >= 0"),
    ("_dropout_mask", {"p": 1.5}, r"'p' must be >= 0 and <= 1"),
    ("split", {"num_outputs": 0}, r"SliceChannel: attribute 'num_outputs' must be >= 1, got 0"),
    ("SliceChannel", {"num_outputs": "-2"}, r"'num_outputs' must be >= 1, got '-2'"),
])
def test_attribute_values_out_of_range_are_refused_at_the_call(op, attrs, message):
    with pytest.raises(AttributeValueError, match=message):
        get(op).parse_attrs(attrs)


def test_every_default_lies_within_its_declared_range():
    for op in OPS.values():
        for key, spec in op.attrs.items():
            if spec.default is not registry.REQUIRED and (spec.low, spec.high) != (None, None):
                registry.parse_attr_value(op.name, key, spec, spec.default)  # no error


# --- memory facts the planner relies on: ``view`` and ``kernel_out`` ----------------------

def _memory_rows(wanted):
    from test_registry_table import ROWS

    return [pytest.param(row, id=row.id) for row in ROWS if wanted(OPS[row.op])]


def _run_kernel(row):
    from test_registry_table import _inputs

    op = OPS[row.op]
    arrays = _inputs(row, np.dtype("float32"))
    return arrays, op.kernel(*arrays, **op.parse_attrs(row.attrs))


@pytest.mark.parametrize("row", _memory_rows(lambda op: op.view))
def test_ops_declared_views_return_a_view_of_their_first_input(row):
    """``view=True`` tells the memory planner the result owns no memory; a kernel that
    copied would make the plan under-count, so the claim is checked on the real kernel."""
    arrays, result = _run_kernel(row)
    assert np.shares_memory(result, arrays[0])


@pytest.mark.parametrize("row", _memory_rows(lambda op: op.kernel_out is not None))
def test_ops_with_an_out_form_return_fresh_arrays(row):
    """The ``kernel_out`` promise: the plain kernel never returns a view of an input, so
    the compiler may later write into its result."""
    arrays, result = _run_kernel(row)
    assert not any(np.shares_memory(result, a) for a in arrays)


def test_reshape_ops_are_views():
    for name in ("Reshape", "Flatten", "expand_dims", "squeeze", "reshape_like"):
        assert get(name).view, name


def test_a_reshape_does_not_pin_its_input_out_of_the_static_arena():
    """::

        x -> relu -> Flatten -> dot(., w)
    Flatten returns a view of relu's result: relu's result may live in the arena (it
    stays alive as long as the view), and the program still computes the right thing."""
    from hybridlab.graph import ir
    from hybridlab.graph.codegen import compile_graph
    from hybridlab.graph.passes import run_pipeline

    f32 = np.dtype("float32")
    x, w = ir.var("x", Aval((4, 2, 3), f32)), ir.var("w", Aval((6, 5), f32))
    relu = ir.call("relu", [x.out()], name="relu0")
    flat = ir.call("Flatten", [relu.out()], name="flatten0")
    product = ir.call("dot", [flat.out(), w.out()], name="dot0")
    graph, _ = run_pipeline(ir.Graph.from_outputs([product.out()], [x, w]), verify=True)
    plan = graph.meta["memory"]
    relu_key = next((id(n), 0) for n in graph.nodes if n.op == "relu")
    assert plan.buffer_of.get(relu_key) == 0  # in the arena, not pinned out of it
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(f32) for s in ((4, 2, 3), (6, 5))]
    program = compile_graph(graph, static_alloc=True)
    for _ in range(2):  # the second call reuses the arena
        (out,) = program(*arrays)
        np.testing.assert_allclose(out, np.maximum(arrays[0], 0).reshape(4, 6) @ arrays[1],
                                   rtol=1e-6)


def test_flatten_of_a_0d_value_is_a_shape_error():
    with pytest.raises(ShapeError, match=r"Flatten: a 0-d value has no first axis"):
        get("Flatten").infer(Aval((), np.dtype("float32")))


def test_integer_gradients_of_broadcasting_and_mean_keep_the_integer_dtype():
    """``sum_like`` of int32 used to come back int64 and the mean's ``_unreduce`` float64;
    the values are the integer sums and the truncated quotients."""
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    summed = eager.sum_like(x, np.zeros((1, 3), np.int32)).data
    assert summed.dtype == np.int32
    np.testing.assert_array_equal(summed, [[3, 5, 7]])
    spread = eager._unreduce(np.array([7, 9], np.int32), x, axis=1, mean=True).data
    assert spread.dtype == np.int32
    np.testing.assert_array_equal(spread, [[2, 2, 2], [3, 3, 3]])


def test_where_with_a_row_condition_picks_whole_rows_as_mxnet():
    import hybridlab as mx
    from hybridlab import autograd, nd

    rows = nd.array([1, 0, 1])
    x, y = nd.ones((3, 3)), nd.zeros((3, 3))  # square: numpy would pick columns
    expected = [[1, 1, 1], [0, 0, 0], [1, 1, 1]]
    np.testing.assert_array_equal(nd.where(rows, x, y).asnumpy(), expected)
    where = mx.sym.where(mx.sym.var("c"), mx.sym.var("x"), mx.sym.var("y"))
    assert where.infer_shape(c=(3,), x=(3, 3), y=(3, 3))[1] == [(3, 3)]
    x.attach_grad()
    with autograd.record():
        picked = nd.where(rows, x, y)
    picked.backward()
    np.testing.assert_array_equal(x.grad.asnumpy(), expected)


def test_logical_operators_give_zero_or_one_in_the_data_dtype_and_take_numbers():
    from hybridlab import nd

    a, b = nd.array([[0, 1, 2], [3, 0, 1]], dtype="int32"), nd.array([1, 0, 1], dtype="int32")
    both = nd.broadcast_logical_and(a, b)
    assert both.dtype == np.int32
    np.testing.assert_array_equal(both.asnumpy(), [[0, 0, 1], [1, 0, 1]])
    np.testing.assert_array_equal(nd.logical_or(a, 0).asnumpy(), [[0, 1, 1], [1, 0, 1]])
    np.testing.assert_array_equal(nd.logical_xor(1, a).asnumpy(), [[1, 0, 0], [0, 1, 0]])
    np.testing.assert_array_equal(nd.logical_not(a).asnumpy(), [[1, 0, 0], [0, 1, 0]])


def test_amp_cast_changes_only_float16_and_float32():
    from hybridlab import nd

    assert nd.amp_cast(nd.ones((2,)), dtype="float16").dtype == np.float16
    assert nd.amp_cast(nd.ones((2,), dtype="int32"), dtype="float16").dtype == np.int32
    assert nd.amp_cast(nd.ones((2,), dtype="float64"), dtype="float16").dtype == np.float64


def _conv_nd_ref(x, w, b, stride, pad, dilate):
    """Direct N-D cross-correlation: one tensordot per output position."""
    import itertools

    n = len(stride)
    padded = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in pad])
    kernel = w.shape[2:]
    sizes = [(padded.shape[2 + i] - (kernel[i] - 1) * dilate[i] - 1) // stride[i] + 1
             for i in range(n)]
    out = np.zeros((x.shape[0], w.shape[0], *sizes))
    for at in itertools.product(*map(range, sizes)):
        window = tuple(slice(at[i] * stride[i], at[i] * stride[i] + (kernel[i] - 1) * dilate[i]
                             + 1, dilate[i]) for i in range(n))
        out[(slice(None), slice(None)) + at] = np.tensordot(
            padded[(slice(None), slice(None)) + window], w, axes=([*range(1, n + 2)],) * 2)
    return out + b.reshape(1, -1, *[1] * n)


@pytest.mark.parametrize("ndim", [1, 3])
@pytest.mark.parametrize("stride, pad, dilate", [(1, 0, 1), (2, 1, 1), (1, 1, 2)])
def test_convolution_of_1d_and_3d_data_and_its_gradients(ndim, stride, pad, dilate):
    rng = np.random.default_rng(ndim)
    x, w, b = rng.normal(size=(2, 4) + (6,) * ndim), rng.normal(size=(4, 2) + (3,) * ndim), \
        rng.normal(size=4)
    attrs = {"kernel": (3,) * ndim, "stride": (stride,) * ndim, "pad": (pad,) * ndim,
             "dilate": (dilate,) * ndim, "num_filter": 4, "num_group": 2}

    def ref(x, w):
        return np.concatenate([_conv_nd_ref(x[:, 2 * i:2 * i + 2], w[2 * i:2 * i + 2],
                                            b[2 * i:2 * i + 2], attrs["stride"], attrs["pad"],
                                            attrs["dilate"]) for i in (0, 1)], axis=1)

    y = eager.Convolution(x, w, b, **attrs).data
    np.testing.assert_allclose(y, ref(x, w), rtol=1e-10)
    cotangent = rng.normal(size=y.shape)
    grads = {"x": eager._conv_data_grad(cotangent, w, x, **attrs).data,
             "w": eager._conv_weight_grad(cotangent, x, **attrs).data}
    for name, array in (("x", x), ("w", w)):
        for _ in range(4):  # central differences of sum(y * cotangent) at random entries
            at = tuple(rng.integers(0, n) for n in array.shape)
            plus, minus = array.copy(), array.copy()
            plus[at] += 1e-6
            minus[at] -= 1e-6
            args = {"x": x, "w": w}
            slope = ((ref(**{**args, name: plus}) - ref(**{**args, name: minus})) * cotangent
                     ).sum() / 2e-6
            assert abs(slope - grads[name][at]) < 1e-5


def test_one_d_pooling_and_mxnets_same_convention():
    from hybridlab import autograd, nd

    x = nd.array(np.arange(10, dtype=np.float32).reshape(1, 1, 10) % 4)
    same = nd.Pooling(x, kernel=3, stride=2, pad=(0, 0, 0), pool_type="max",
                      pooling_convention="same")
    assert same.shape == (1, 1, 5)  # ceil(10 / 2) windows; the last one is cut at the end
    np.testing.assert_array_equal(same.asnumpy().ravel(), [2, 3, 2, 3, 1])
    x.attach_grad()
    with autograd.record():
        mean = nd.Pooling(x, kernel=(2,), stride=(2,), pool_type="avg")
    mean.backward()
    np.testing.assert_array_equal(x.grad.asnumpy(), np.full((1, 1, 10), 0.5))
    with pytest.raises(ShapeError, match="stride=.*needs one value per axis"):
        nd.Pooling(x, kernel=(2,), stride=(2, 3))


def test_dropout_of_everything_is_nan_as_mxnets_zero_times_infinity():
    from hybridlab import autograd, nd

    x = nd.ones((3,))
    x.attach_grad()
    with autograd.record():
        y = nd.Dropout(x, p=1.0)
    y.backward()
    assert np.isnan(y.asnumpy()).all() and np.isnan(x.grad.asnumpy()).all()


def test_softmax_with_length_weighs_only_the_first_length_values():
    from hybridlab import autograd, nd

    x = nd.array(np.random.default_rng(0).normal(size=(2, 4, 3)))
    length = nd.array([[1, 2, 4], [3, 4, 2]], dtype="int32")
    x.attach_grad()
    with autograd.record():
        y = nd.softmax(x, length, axis=1, use_length=True)
    y.backward(nd.array(np.arange(24).reshape(2, 4, 3)))
    out, grad, n = y.asnumpy(), x.grad.asnumpy(), length.asnumpy()
    past = np.arange(4)[None, :, None] >= n[:, None, :]
    assert (out[past] == 0).all() and (grad[past] == 0).all()
    np.testing.assert_allclose(out.sum(axis=1), 1, rtol=1e-6)
    with pytest.raises(ShapeError, match="softmax: length of shape"):
        nd.softmax(x, nd.ones((2, 4)), axis=1, use_length=True)


def test_float16_softmax_is_computed_in_float32_as_mxnets_safe_accumulation():
    from hybridlab import autograd, nd

    x = nd.random.uniform(shape=(4, 500)).astype("float16")
    x.attach_grad()
    with autograd.record():
        y = nd.softmax(x)
    y.backward()  # d sum(softmax) = 0: float16 sums of 500 terms would leave ~1e-3
    assert y.dtype == np.float16 and np.abs(x.grad.asnumpy()).max() < 1e-5


def test_up_sampling_refuses_what_it_does_not_compute():
    from hybridlab import nd

    with pytest.raises(ValueError, match="UpSampling: hybridlab has sample_type='nearest'"):
        nd.UpSampling(nd.ones((1, 1, 2, 2)), scale=2, sample_type="bilinear")


@pytest.mark.parametrize("axis", [0, 1, None])
def test_topk_of_a_few_picks_as_a_stable_sort_would_ties_and_all(axis):
    """topk of k much smaller than the axis selects by a partition; with many ties at the
    k-th value it must still pick, and order, as the first k of a stable sort."""
    rng = np.random.default_rng(3)
    for data in (rng.integers(0, 3, (30, 40)).astype(np.float32), rng.normal(size=(30, 40))):
        for ascend in (True, False):
            key = (data if ascend else -data).reshape(-1) if axis is None else (
                data if ascend else -data)
            stable = np.argsort(key, axis=0 if axis is None else axis, kind="stable")
            expected = np.take(stable, np.arange(5), axis=0 if axis is None else axis)
            got = eager.topk(data, axis=axis, k=5, ret_typ="indices", is_ascend=ascend).data
            np.testing.assert_array_equal(got, expected.astype(np.float32))
