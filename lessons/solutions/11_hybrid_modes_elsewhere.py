"""Reference solutions for lesson 11 (hybrid modes elsewhere); tests/test_lessons.py runs
them, and `make assignments` builds the lesson's assignment from them
(tools/assignments.py). Exercises 1, 2 and 4 need only JAX (the course installs it);
exercise 3 needs torch."""

import jax
import jax.extend
import jax.numpy as jnp

from hybridlab import sym


# %% Exercise 1
def clip_norm(x):
    ### BEGIN SOLUTION
    # The operator jnp.where chooses, so the compiled program holds both candidates and the
    # norm picks one on every call.
    norm = jnp.sqrt((x * x).sum())
    return jnp.where(norm > 1, x / norm, x)
    ### END SOLUTION


# %% Exercise 2
def convert(closed, names):
    ### BEGIN SOLUTION
    # Section 2's converter, with tanh, sub and mul added; a literal operand (the 1.0 of
    # ``1 - y``) is read as a Python float, which Symbol arithmetic accepts on either side.
    env = {var: sym.var(name) for var, name in zip(closed.jaxpr.invars, names)}

    def read(atom):
        return float(atom.val) if isinstance(atom, jax.extend.core.Literal) else env[atom]

    for eqn in closed.jaxpr.eqns:
        args = [read(atom) for atom in eqn.invars]
        primitive = eqn.primitive.name
        if primitive == "dot_general":
            out = sym.dot(*args)
        elif primitive == "broadcast_in_dim":
            out = args[0]
        elif primitive == "add":
            out = sym.broadcast_add(*args)
        elif primitive == "sub":
            out = args[0] - args[1]
        elif primitive == "mul":
            out = args[0] * args[1]
        elif primitive == "max":
            out = sym.maximum(*args)
        elif primitive == "tanh":
            out = sym.tanh(args[0])
        else:
            raise NotImplementedError(f"no conversion for the primitive {primitive!r}")
        env[eqn.outvars[0]] = out
    return env[closed.jaxpr.outvars[0]]
    ### END SOLUTION


# %% Exercise 3
### BEGIN SOLUTION
# The sum; the product and its sum; the comparison `total > 0` -- three stretches of
# tensor code between the two prints and the `if`, three graphs.
GRAPH_COUNT = 3
### END SOLUTION

# %% Exercise 4
### BEGIN SOLUTION
# The call costs tens of microseconds whatever the size; 2 * 512**3 flops at a few tens
# of GFLOP/s on one core take about a millisecond or two: a ratio of tens.
DISPATCH_RATIO = 20.0
### END SOLUTION

# %% Autograding
# Exercise 4 is graded on the stepping clock of the reference tests (the call returns
# after 0.1 ms, the value is ready 1.9 ms later: a ratio of 20). Exercise 3 needs torch
# where it is graded (REQUIRES); without it, its check says how to install it.
AUTOGRADE = {
    1: ["check_jit_rewrite(clip_norm)"],
    2: ["check_jaxpr_converter(convert)"],
    3: ["check_graph_count(GRAPH_COUNT)"],
    4: ["check_dispatch_ratio(DISPATCH_RATIO, size=64, "
        "timer=stepping_clock([0, 0, 1e-4, 1.9e-3]))"],
}
REQUIRES = {3: "torch"}
