"""Every exercise check can fail: wrong answers get a falsy verdict that explains why."""

from __future__ import annotations

import numpy as np
import pytest

from hybridlab import exercises, nd, random
from hybridlab.gluon import nn


def test_feedback_prints_and_is_truthy_only_when_correct():
    assert bool(exercises.Feedback(True, "fine")) and str(exercises.Feedback(True, "x")).startswith(
        "Correct")
    assert not exercises.Feedback(False, "why") and "why" in str(exercises.Feedback(False, "why"))


def test_wrong_mlp_sizes_are_explained():
    random.seed(0)
    net = nn.HybridSequential()
    net.add(nn.Dense(32, activation="relu"), nn.Dense(3))
    net.initialize()
    verdict = exercises.check_tour_mlp(net)
    assert not verdict and "units" in verdict.message


def test_not_a_hybrid_sequential_is_explained():
    assert "HybridSequential" in exercises.check_tour_mlp(nn.Sequential()).message


def test_wrong_fc_count():
    net = nn.HybridSequential()
    net.add(nn.Dense(4), nn.Dense(2))
    net.initialize()
    assert "pass the network itself" in exercises.check_fc_count(None, 2).message
    assert exercises.check_fc_count(net, 2) and not exercises.check_fc_count(net, 3)
    net(nd.ones((1, 3)))  # before or after a first call: the program has the same operators
    assert exercises.check_fc_count(net, 2) and not exercises.check_fc_count(net, 3)


def test_symbol_program_mistakes_are_named():
    verdict = exercises.check_symbol_program(lambda a, b, c, d: (a + b) * (c + d))
    assert not verdict and "(a + b)" in verdict.message
    assert not exercises.check_symbol_program(lambda a, b, c, d: 3)
    assert "raised" in exercises.check_symbol_program(lambda a, b, c: a).message


def test_fancy_func_node_count_wrong():
    assert not exercises.check_fancy_func_nodes(8)


def test_dense_with_fully_connected_is_rejected():
    def coarse(F, x, weight, bias):
        return F.FullyConnected(x, weight, bias, num_hidden=3)

    def wrong(F, x, weight, bias):
        return F.broadcast_add(F.dot(x, weight, transpose_b=False), bias)

    assert "still uses FullyConnected" in exercises.check_dense_from_primitives(coarse).message
    assert not exercises.check_dense_from_primitives(wrong)


def test_broken_block_fails_the_hybridize_check():
    verdict = exercises.check_hybridizable(exercises.BrokenBlock)
    assert not verdict and "F.*" in verdict.message


def test_print_count_wrong():
    assert not exercises.check_print_count(5)


def test_export_roundtrip_without_files(tmp_path):
    verdict = exercises.check_export_roundtrip(str(tmp_path / "nothing"), None, None)
    assert not verdict and "export" in verdict.message


def test_sync_point_answers_that_are_wrong_or_unknown():
    verdict = exercises.check_sync_points({"print", "shape"})
    assert not verdict and "missing" in verdict.message and "shape" in verdict.message
    assert "not among" in exercises.check_sync_points({"len"}).message


def test_ready_count_and_span_wrong_answers():
    assert not exercises.check_ready_after_two_steps(1)
    assert not exercises.check_makespan(2, 5)
    assert exercises.check_makespan(1, 5)  # one worker: the five tasks one after another
    assert not exercises.check_span(5)  # the makespan on one worker is not the span
    assert "workers" in exercises.check_span(5).message


def test_a_block_that_hybridizes_but_computes_the_wrong_rows_fails():
    class MaxScaler(nn.HybridBlock):  # divides by the row maximum: hybridizes, wrong numbers
        def hybrid_forward(self, F, x):
            return F.broadcast_div(x, F.max(x, axis=1, keepdims=True))

    verdict = exercises.check_hybridizable(MaxScaler)
    assert not verdict and "sum to one" in verdict.message and "hybridized" not in str(
        verdict).split(",")[0]


def _exported(tmp_path, epoch=0):
    random.seed(0)
    net = nn.HybridSequential()
    net.add(nn.Dense(4, activation="relu"), nn.Dense(2))
    net.initialize()
    net.hybridize()
    x = nd.random.normal(shape=(3, 5))
    net(x)
    prefix = str(tmp_path / "model")
    net.export(prefix, epoch=epoch)
    return prefix, net, x


def test_export_roundtrip_fails_when_the_parameters_changed_after_export(tmp_path):
    prefix, net, x = _exported(tmp_path)
    assert exercises.check_export_roundtrip(prefix, net, x)
    for param in net.collect_params().values():  # "trained" after the export
        param.set_data(param.data() * 2)
    verdict = exercises.check_export_roundtrip(prefix, net, x)
    assert not verdict and "different outputs" in verdict.message


def test_export_roundtrip_looks_for_the_epoch_it_is_told(tmp_path):
    prefix, net, x = _exported(tmp_path, epoch=1)
    verdict = exercises.check_export_roundtrip(prefix, net, x)  # epoch 0 was never written
    assert not verdict and "model-0000.params" in verdict.message and "epoch=0" in verdict.message
    assert exercises.check_export_roundtrip(prefix, net, x, epoch=1)


def test_the_blocks_to_repair_fail_their_checks_with_a_hint():
    for block, check, error, hint in [
            (exercises.SignGate, exercises.check_sign_gate, "SymbolBoolError", "F.where"),
            (exercises.FlattenBlock, exercises.check_flatten, "SymbolShapeError", "reshape codes"),
            (exercises.LastColumn, exercises.check_last_column, "SymbolIndexError",
             "slice_axis")]:
        verdict = check(block)
        assert not verdict and error in verdict.message and "Hint: " in verdict.message, block
        assert hint in verdict.message.split("Hint: ")[1]


def test_plausible_wrong_repairs_fail():
    class Elementwise(nn.HybridBlock):  # decides per element, not on the batch total
        def hybrid_forward(self, F, x):
            return F.where(x > 0, x * 2, x / 2)

    class FixedWidth(nn.HybridBlock):  # hard-codes the size of one input
        def hybrid_forward(self, F, x):
            return x.reshape((-1, 12))

    class WrongAxis(nn.HybridBlock):  # slices rows instead of columns
        def hybrid_forward(self, F, x):
            return F.slice_axis(x, axis=0, begin=-1, end=None)

    class ThirdColumn(nn.HybridBlock):  # right for 3 features only
        def hybrid_forward(self, F, x):
            return F.slice_axis(x, axis=1, begin=2, end=3)

    verdict = exercises.check_sign_gate(Elementwise)
    assert not verdict and "positive total" in verdict.message
    assert not exercises.check_flatten(FixedWidth)
    verdict = exercises.check_last_column(WrongAxis)
    assert not verdict and "shape" in verdict.message
    verdict = exercises.check_last_column(ThirdColumn)
    assert not verdict and "(4, 5)" in verdict.message


def test_lesson07_wrong_gradients_are_explained():
    from hybridlab import autograd
    from hybridlab.exercises import lesson07

    def only_x(x, w):  # forgets w: returns x's gradient twice
        x.attach_grad()
        with autograd.record():
            result = lesson07.energy(x, w)
        result.backward()
        return x.grad, x.grad

    def without_record(x, w):  # backward on an array no recorded op made
        x.attach_grad()
        w.attach_grad()
        lesson07.energy(x, w).backward()
        return x.grad, w.grad

    assert "return a pair" in lesson07.check_gradients(lambda x, w: x).message
    verdict = lesson07.check_gradients(only_x)
    assert not verdict and "gradient for w has shape" in verdict.message
    verdict = lesson07.check_gradients(without_record)
    assert not verdict and "NotRecordedError" in verdict.message


def test_lesson07_one_sided_and_careless_differences_fail():
    from hybridlab.exercises import lesson07

    def one_sided(f, x, eps=1e-5):
        grad, base = np.zeros_like(x), f(x)
        for index in np.ndindex(x.shape):
            saved = x[index]
            x[index] = saved + eps
            grad[index] = (f(x) - base) / eps
            x[index] = saved
        return grad

    def never_restores(f, x, eps=1e-5):
        grad = np.zeros_like(x)
        for index in np.ndindex(x.shape):
            x[index] += eps
            above = f(x)
            x[index] -= 2 * eps
            grad[index] = (above - f(x)) / (2 * eps)
        return grad

    verdict = lesson07.check_numeric_gradient(one_sided)
    assert not verdict and "one-sided" in verdict.message
    verdict = lesson07.check_numeric_gradient(never_restores)
    assert not verdict and "x changed" in verdict.message
    verdict = lesson07.check_numeric_gradient(lambda f, x, eps: np.zeros(3))
    assert not verdict and "shape" in verdict.message


def test_lesson07_train_step_that_recomputes_too_much_or_nothing_fails():
    from hybridlab import autograd
    from hybridlab.exercises import lesson07

    def recompute_all(layer, x, weights, every):  # the lesson's version: 2n layer calls
        segments = [weights[i:i + every] for i in range(0, len(weights), every)]
        checkpoints, h = [], x
        for segment in segments:
            checkpoints.append(h)
            for w in segment:
                h = layer(h, w)
        out_grad = nd.ones(h.shape)
        for segment, start in zip(reversed(segments), reversed(checkpoints)):
            start.attach_grad()
            with autograd.record():
                end = start
                for w in segment:
                    end = layer(end, w)
            end.backward(out_grad)
            out_grad = start.grad

    def store_everything(layer, x, weights, every):
        with autograd.record():
            h = x
            for w in weights:
                h = layer(h, w)
        h.backward()

    def first_segment_only(layer, x, weights, every):
        with autograd.record():
            h = x
            for w in weights[:every]:
                h = layer(h, w)
        h.backward()

    verdict = lesson07.check_train_step(recompute_all)
    assert not verdict and "ran 12 times, not 10" in verdict.message
    verdict = lesson07.check_train_step(store_everything)
    assert not verdict and "ran 6 times" in verdict.message
    verdict = lesson07.check_train_step(first_segment_only)
    assert not verdict and "gradients differ" in verdict.message


def test_lesson08_checks_fail_on_wrong_sizes_and_wrong_interpreters():
    import json

    from hybridlab.exercises import lesson08

    assert not lesson08.check_params_size(208 - 8)  # forgot the number of names
    assert not lesson08.check_params_size(0)

    def raises(text, params, data):
        raise NotImplementedError("FullyConnected")

    def no_bias(text, params, data):  # forgets the bias and the activations
        graph = json.loads(text)
        x = data.reshape(len(data), -1)
        for node in graph["nodes"]:
            if node["op"] == "FullyConnected":
                x = x @ params[graph["nodes"][node["inputs"][1][0]]["name"]].T
        return x

    failed = lesson08.check_json_interpreter(raises)
    assert not failed and "NotImplementedError" in failed.message and "Activation" in failed.message
    assert not lesson08.check_json_interpreter(no_bias)


def test_lesson08_onnx_check_fails_on_a_fixed_batch_and_other_weights(tmp_path):
    import numpy as np

    import hybridlab as mx
    from hybridlab import nd
    from hybridlab.exercises import lesson08
    from hybridlab.gluon import nn

    def classifier():
        net = nn.HybridSequential()
        net.add(nn.Dense(3))
        net.initialize()
        net.hybridize()
        net(nd.ones((2, 5)))
        return net

    net, other = classifier(), classifier()
    fixed = mx.onnx.export_model(net, None, in_shapes=[(2, 5)], in_types=[np.float32],
                                 onnx_file_path=str(tmp_path / "fixed.onnx"))
    failed = lesson08.check_onnx_batch(fixed, net)
    assert not failed and "batch dimension left free" in failed.message
    free = mx.onnx.export_model(other, None, in_shapes=[(2, 5)], in_types=[np.float32],
                                onnx_file_path=str(tmp_path / "free.onnx"), dynamic=True,
                                dynamic_input_shapes=[(None, 5)])
    assert lesson08.check_onnx_batch(free, other)
    assert not lesson08.check_onnx_batch(free, net)  # another network's weights
    assert not lesson08.check_onnx_batch(str(tmp_path / "missing.onnx"), net)


@pytest.mark.slow
def test_lesson09_checks_fail_on_wrong_predictions_and_wrong_counts():
    pytest.importorskip("onnx")
    from hybridlab.exercises import lesson09

    failed = lesson09.check_dense_concat_bytes(128 * 28 * 28 * 4)  # the block's input only
    assert not failed and "growth rate" in failed.message
    assert not lesson09.check_dense_concat_bytes(512 * 28 * 28)  # forgot 4 bytes a float
    assert not lesson09.check_dense_concat_bytes("big")
    failed = lesson09.check_inception_speedup(4.0)  # as if every worker were busy
    assert not failed and "more than the span allows" in failed.message
    assert not lesson09.check_inception_speedup(1.0)

    def every_add(graph):  # counts a BatchNorm's bias as a residual sum
        return sum(1 for node in graph.nodes if node.op in ("broadcast_add", "elemwise_add"))

    failed = lesson09.check_residual_sums(every_add)
    assert not failed and "bias" in failed.message
    failed = lesson09.check_residual_sums(lambda graph: 1 / 0)
    assert not failed and "ZeroDivisionError" in failed.message


def test_liveness_bound_predictions_are_measured_and_explained():
    from hybridlab.exercises import lesson05

    right = (32 * 256 + 32 * 128) * 4
    for wrong, why in [(right // 4, "4"), (right * 2, "batch 64"), (32 * 256 * 4, "same step"),
                       (right + 1000, "in place")]:
        verdict = lesson05.check_liveness_bound(wrong)
        assert not verdict and why in verdict.message, (wrong, verdict.message)
        assert f"{abs(wrong - right)} bytes" in verdict.message
    assert "unplanned" in lesson05.check_liveness_bound(lesson05._mlp_bound(32)[1]).message


def test_retrace_predictions_off_by_a_factor_of_two_fail_and_say_why(monkeypatch):
    from _clock import CompileClock

    clock = CompileClock(monkeypatch)  # 0.1 ms a task, 8 ms a compile: 82x
    assert exercises.check_retrace_cost(50, timer=clock)
    low = exercises.check_retrace_cost(30, timer=clock)
    assert not low and "compiles new Python source" in low.message and "82x" in low.message
    high = exercises.check_retrace_cost(1000, timer=clock)
    assert not high and "one-off per shape" in high.message
    assert not exercises.check_retrace_cost(0)


def test_params_size_says_how_far_off_and_what_was_missed():
    from hybridlab.exercises import lesson08

    verdict = lesson08.check_params_size(208 - 64)
    assert not verdict and "64 too few" in verdict.message and "16 float32" in verdict.message
    assert "too many" in lesson08.check_params_size(300).message
    assert not lesson08.check_params_size("208")


def test_tape_byte_predictions_are_measured_and_explained():
    from hybridlab.exercises import lesson07

    activation = 32 * 64 * 4
    assert lesson07.check_tape_bytes(33 * activation)
    for wrong, why in [(32 * activation, "input"), (17 * activation, "two arrays"),
                       (33 * activation + 16 * 64 * 64 * 4, "weights")]:
        verdict = lesson07.check_tape_bytes(wrong)
        assert not verdict and why in verdict.message, verdict.message
        assert f"{abs(wrong - 33 * activation)} bytes" in verdict.message


def test_lesson11_checks_fail_on_the_original_and_on_plausible_mistakes():
    import jax.numpy as jnp

    from hybridlab import sym
    from hybridlab.exercises import lesson11

    verdict = lesson11.check_jit_rewrite(lesson11.clip_norm)
    assert not verdict and "jnp.where" in verdict.message
    # dividing always (no decision) is right above norm 1 and wrong below it
    verdict = lesson11.check_jit_rewrite(lambda x: x / jnp.sqrt((x * x).sum()))
    assert not verdict and "at most 1" in verdict.message
    assert "raised" in lesson11.check_jit_rewrite(lambda x: x.no_such_method()).message

    def no_tanh(closed, names):  # section 2's converter, which knows no tanh
        raise NotImplementedError("no conversion for the primitive 'tanh'")

    def swapped_sub(closed, names):  # y - 1 instead of 1 - y
        w, x = sym.var("w"), sym.var("x")
        y = sym.dot(x, w)
        return sym.tanh(y) * (y - 1.0)

    assert "tanh" in lesson11.check_jaxpr_converter(no_tanh).message
    verdict = lesson11.check_jaxpr_converter(swapped_sub)
    assert not verdict and "order" in verdict.message
    assert "Symbol" in lesson11.check_jaxpr_converter(lambda c, n: 3).message


def test_lesson11_dispatch_ratio_far_off_fails_and_says_why():
    from _clock import stepping_clock

    from hybridlab.exercises import lesson11

    def clock():  # returned after 0.1 ms, ready 1.9 ms later: 20
        return stepping_clock([0, 0, 1e-4, 1.9e-3])

    verdict = lesson11.check_dispatch_ratio(1.0, size=64, timer=clock())
    assert not verdict and "no difference at all" in verdict.message
    verdict = lesson11.check_dispatch_ratio(5.0, size=64, timer=clock())
    assert not verdict and "4.0 times too low" in verdict.message
    assert lesson11.check_dispatch_ratio(25.0, size=64, timer=clock())
    assert not lesson11.check_dispatch_ratio(-1)


def test_lesson11_graph_count_wrong_guess_or_no_torch():
    from hybridlab.exercises import lesson11

    try:
        import torch  # noqa: F401 -- optional: without it the check says how to install it
    except ImportError:
        verdict = lesson11.check_graph_count(3)
        assert not verdict and "pip install torch" in verdict.message
        return
    verdict = lesson11.check_graph_count(4)  # two prints and an if: three graphs
    assert not verdict and "not 4" in verdict.message and "print" in verdict.message


def test_lesson06_concept_checks_fail_the_blocks_as_given_and_plausible_mistakes():
    verdict = exercises.check_centre(exercises.CentreInPlace)
    assert not verdict and "not a buffer" in verdict.message

    class Minus(nn.HybridBlock):  # no write into x, but - of two Symbols does not broadcast
        def hybrid_forward(self, F, x):
            return x - x.mean(axis=1, keepdims=True)

    assert "broadcast" in exercises.check_centre(Minus).message
    verdict = exercises.check_row_means(exercises.AddRowMeans)
    assert not verdict and "F.broadcast_add" in verdict.message
    for wrong, why in [((2, 2), "count the tasks"), ((6, 0), "count the compiled programs"),
                       ((10, 0), "count the compiled programs")]:
        verdict = exercises.check_mixed_tasks(wrong)
        assert not verdict and why in verdict.message, (wrong, verdict.message)
    assert "pair of whole numbers" in exercises.check_mixed_tasks(6).message
