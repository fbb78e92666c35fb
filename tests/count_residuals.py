"""Run in JAX's interpreter: the bytes jax.vjp keeps for a backward pass over a catalogue net in evaluation mode
(the jax adapter's tracked inference), as JSON on stdout.

They are the arrays the pullback holds, less the weights and the batch it holds too (those exist anyway), each
array counted once; `tests/test_estimate.py` sets them beside the estimate's saved activations.
Usage: python -m tests.count_residuals MODEL BATCH
"""

from __future__ import annotations

import json
import sys

import jax

from frameworks.jax_adapter import JaxAdapter
from models.scenario import Scenario


def main(model: str, batch: str) -> None:
    adapter = JaxAdapter(Scenario.create("jax", model, batch=int(batch), kind="infer", device="cpu",
                                         technique="tracked"))
    adapter.import_framework()
    adapter.init_device()
    adapter.build()
    adapter.compile()
    forward = jax.jit(lambda params, inputs: adapter.apply(params, adapter.state, inputs)[0])
    _, pullback = jax.vjp(forward, adapter.params, adapter.inputs)
    existing = {id(array) for array in (*jax.tree_util.tree_leaves(adapter.params), adapter.inputs)}
    residuals = {id(leaf): leaf for leaf in jax.tree_util.tree_leaves(pullback)
                 if hasattr(leaf, "nbytes") and id(leaf) not in existing}
    json.dump({"bytes": sum(array.nbytes for array in residuals.values()), "arrays": len(residuals)}, sys.stdout)


if __name__ == "__main__":
    main(*sys.argv[1:])
