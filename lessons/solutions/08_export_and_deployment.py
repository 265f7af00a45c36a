"""Reference solutions for lesson 08 (export and deployment); tests/test_lessons.py runs
them, and `make assignments` builds the lesson's assignment from them
(tools/assignments.py)."""

import json

import numpy as np

from hybridlab import nd
from hybridlab.gluon import nn


def classifier() -> nn.HybridSequential:
    """A classifier like section 1's: 5 input features, 3 classes, hybridized, run once."""
    model = nn.HybridSequential()
    model.add(nn.Dense(8, activation="relu"), nn.Dense(3))
    model.initialize()
    model.hybridize()
    model(nd.ones((2, 5)))
    return model


net = classifier()  # exercise 3 exports it


# %% Exercise 1
### BEGIN SOLUTION
# 24 (file header) + weight (4 + 4 + 4 + 2 x 8 + 8 + 4 = 40 of header, 48 of data) + bias
# (32 of header, 16 of data) + 8 (number of names) + 8 + 13 ("arg:fc_weight") + 8 + 11
# ("arg:fc_bias").
PARAMS_SIZE = 24 + (40 + 48) + (32 + 16) + 8 + (8 + 13) + (8 + 11)
### END SOLUTION


# %% Exercise 2
def run_json(json_text, params, data):
    ### BEGIN SOLUTION
    # A numpy interpreter of the exported JSON.
    activations = {"relu": lambda x: np.maximum(x, 0),
                   "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "tanh": np.tanh}
    graph = json.loads(json_text)
    values = []  # one list of outputs per node, in node order
    for node in graph["nodes"]:
        attrs = node.get("attrs", {})
        args = [values[i][k] for i, k, _ in node["inputs"]]
        op = node["op"]
        if op == "null":  # an input: the data, or a parameter by name
            out = params[node["name"]] if node["name"] in params else data
        elif op == "FullyConnected":
            x = args[0].reshape(len(args[0]), -1) if attrs.get("flatten", "True") == "True" \
                else args[0]
            out = x @ args[1].T
            if attrs.get("no_bias", "False") != "True":
                out = out + args[2]
        elif op == "Activation":
            out = activations[attrs["act_type"]](args[0])
        elif op in activations:
            out = activations[op](args[0])
        elif op == "Flatten":
            out = args[0].reshape(len(args[0]), -1)
        elif op in ("elemwise_add", "broadcast_add"):
            out = args[0] + args[1]
        else:
            raise NotImplementedError(f"operator {op}")
        values.append([out])
    (head,) = graph["heads"]
    return values[head[0]][head[1]]
    ### END SOLUTION


# %% Exercise 3
def export_any_batch(net, path):
    """Export ``net`` to the ONNX file ``path``; return the path."""
    ### BEGIN SOLUTION
    # Leave the batch dimension free.
    import hybridlab as mx

    return mx.onnx.export_model(net, None, in_shapes=[(2, 5)], in_types=[np.float32],
                                onnx_file_path=path, dynamic=True,
                                dynamic_input_shapes=[(None, 5)])
    ### END SOLUTION


# %% Autograding
AUTOGRADE = {
    1: ["check_params_size(PARAMS_SIZE)"],
    2: ["check_json_interpreter(run_json)"],
    3: ["check_onnx_batch(export_any_batch(net, 'any.onnx'), net)"],
}
