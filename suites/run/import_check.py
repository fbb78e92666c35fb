"""`models --model-file FILE --check`: proof that an imported net is the file's net, for the user's own file.

The spec, given the file's own weights (an ONNX file's initializers, `canonical_weights`), runs in each
framework's worker (its forward job, every file in one worker per framework) on one fixed batch, in inference;
onnx's reference evaluator, the standard's own semantics, computes the file's graph on the same batch (each of its
dropouts the identity, as in inference). Each framework's answer is its largest difference from the reference.
"""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from models.importers.files import load_spec_file
from models.protocol import write_scenario
from models.scenario import Scenario
from models.spec import ModelSpec, SpecError
from suites.run.orchestrator import worker_environment
from suites.run.registry import ROOT, interpreter

BATCH = 2
RELATIVE_TOLERANCE = 1e-4  # of the reference's largest value (float32 sums over a deep net, in another order):
# relative, since an untrained net's outputs may be tiny (torchvision's efficientnet_b0 at 64x64: about 1e-13)
TIMEOUT_S = 1800.0


@dataclass(frozen=True)
class Agreement:
    """One framework's output against the reference, for one file."""

    framework: str
    difference: float  # the largest absolute difference
    scale: float  # the reference's largest absolute value

    @property
    def agrees(self) -> bool:
        """Within the tolerance of outputs that are not all zero (zeros agree with anything a net of zeros says)."""
        return self.scale > 0 and self.difference <= RELATIVE_TOLERANCE * self.scale


def _arrays(spec: ModelSpec, path: Path) -> dict[str, np.ndarray]:
    """A fixed batch in the spec's channels-last layout, targets for its loss, and the file's own weights."""
    from models.importers.onnx_file import canonical_weights

    generator = np.random.default_rng(0)
    inputs = generator.standard_normal((BATCH, *spec.input_shape), dtype=np.float32)
    targets = (generator.integers(0, spec.output_shape[0], BATCH).astype(np.int32) if spec.loss == "cross_entropy"
               else generator.standard_normal((BATCH, *spec.output_shape), dtype=np.float32))
    return {"inputs": inputs, "targets": targets, **canonical_weights(path, spec)}


def _reference(path: Path, inputs: np.ndarray) -> np.ndarray:
    """The file's own output on the batch (channels-last where it is an image, as the spec's)."""
    from onnx.reference import ReferenceEvaluator

    from models.importers.onnx_file import reference_graph

    model, scores = reference_graph(path)
    image = inputs.transpose(0, 3, 1, 2) if inputs.ndim == 4 else inputs
    (output,) = ReferenceEvaluator(model).run([scores], {model.graph.input[0].name: image})
    return output.transpose(0, 2, 3, 1) if output.ndim == 4 else output


def check(paths: list[str], frameworks: list[str]) -> dict[str, list[Agreement]]:
    """Per file, each framework's agreement with the file's own output. A file that is not ONNX is refused."""
    for path in paths:
        if Path(path).suffix != ".onnx":
            raise SpecError(f"{path}: --check compares with the file's own evaluation, which the suite has for ONNX "
                            f"files only (a .keras file's check is not built yet)")
    specs = [load_spec_file(path) for path in paths]
    with tempfile.TemporaryDirectory(prefix="footprint-check-") as folder:
        jobs: dict[str, list[str]] = {framework: [] for framework in frameworks}
        references = []
        for index, (path, spec) in enumerate(zip(paths, specs, strict=True)):
            arrays = _arrays(spec, Path(path))
            references.append(_reference(Path(path), arrays["inputs"]))
            net = Path(folder) / f"net{index}"
            net.mkdir()
            np.savez(net / "arrays.npz", **arrays)
            for framework in frameworks:
                scenario = Scenario(framework=framework, model=spec.name, batch=BATCH, spec_json=spec.to_dict())
                (net / framework).mkdir()
                jobs[framework] += [write_scenario(scenario.to_dict(), net / framework), str(net / "arrays.npz"),
                                    str(net / f"{framework}.npz")]
        for framework, arguments in jobs.items():
            done = subprocess.run([interpreter(framework), "-m", "frameworks.worker", "forward", *arguments],
                                  cwd=ROOT, env=worker_environment(), capture_output=True, text=True,
                                  timeout=TIMEOUT_S)
            if done.returncode:
                last = (done.stderr.strip().splitlines() or ["no output"])[-1]
                raise SpecError(f"{framework}'s worker could not run the imported nets: {last}")
        return {path: [Agreement(framework, float(np.abs(np.load(Path(folder) / f"net{index}" / f"{framework}.npz")
                                                         ["output"] - reference).max()),
                                 float(np.abs(reference).max())) for framework in frameworks]
                for index, (path, reference) in enumerate(zip(paths, references, strict=True))}


def report(results: dict[str, list[Agreement]]) -> str:
    """A line per file, and one per framework under it."""
    lines = []
    for path, agreements in results.items():
        lines.append(f"{path}: the imported net with the file's weights against onnx's reference evaluator "
                     f"(a batch of {BATCH}, inference)")
        lines += [f"  {each.framework:<17} largest difference {each.difference:.2e} (outputs up to {each.scale:.3g}):"
                  f" {'agrees' if each.agrees else 'DIFFERS' if each.scale else 'all zero, proves nothing'}"
                  for each in agreements]
    return "\n".join(lines)

