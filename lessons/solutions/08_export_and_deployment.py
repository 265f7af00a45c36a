"""Reference solutions for lesson 08 (export and deployment); tests/test_lessons.py runs them."""

import json

import numpy as np

# Exercise 1: 24 (file header) + weight (4 + 4 + 4 + 2 x 8 + 8 + 4 = 40 of header, 48 of
# data) + bias (32 of header, 16 of data) + 8 (number of names) + 8 + 13 ("arg:fc_weight")
# + 8 + 11 ("arg:fc_bias").
PARAMS_SIZE = 24 + (40 + 48) + (32 + 16) + 8 + (8 + 13) + (8 + 11)

ACTIVATIONS = {"relu": lambda x: np.maximum(x, 0), "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
               "tanh": np.tanh}


# Exercise 2: a numpy interpreter of the exported JSON.
def run_json(json_text, params, data):
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
            out = ACTIVATIONS[attrs["act_type"]](args[0])
        elif op in ACTIVATIONS:
            out = ACTIVATIONS[op](args[0])
        elif op == "Flatten":
            out = args[0].reshape(len(args[0]), -1)
        elif op in ("elemwise_add", "broadcast_add"):
            out = args[0] + args[1]
        else:
            raise NotImplementedError(f"operator {op}")
        values.append([out])
    (head,) = graph["heads"]
    return values[head[0]][head[1]]


# Exercise 3: leave the batch dimension free.
def export_any_batch(net, path):
    import hybridlab as mx

    return mx.onnx.export_model(net, None, in_shapes=[(2, 5)], in_types=[np.float32],
                                onnx_file_path=path, dynamic=True,
                                dynamic_input_shapes=[(None, 5)])
