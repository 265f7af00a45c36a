"""Lesson 03's new checks fail on wrong answers, with a reason."""

from __future__ import annotations

from hybridlab import exercises, nd


def test_check_barrier_rejects_global_and_wrong_barriers():
    assert exercises.check_barrier("loss.wait_to_read()")
    verdict = exercises.check_barrier("nd.waitall()")
    assert not verdict and "global barrier" in verdict.message
    verdict = exercises.check_barrier("other.asnumpy()")
    assert not verdict and "does not make loss's value exist" in verdict.message
    assert not exercises.check_barrier("print(loss)")


def test_check_bounded_loop_measures_what_a_runaway_loop_pins():
    def runaway(batches):
        return [nd.dot(x, nd.ones((x.shape[1], 8))) for x in batches]

    verdict = exercises.check_bounded_loop(runaway)
    assert not verdict and "pinned 8 batches at once" in verdict.message

    def wrong_result(batches):
        out = []
        for x in batches:
            out.append(nd.dot(x, nd.ones((x.shape[1], 4))))
            out[-1].wait_to_read()
        return out

    assert not exercises.check_bounded_loop(wrong_result)

    def broken(batches):
        raise RuntimeError("oops")

    verdict = exercises.check_bounded_loop(broken)
    assert not verdict and "RuntimeError: oops" in verdict.message
