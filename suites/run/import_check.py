"""`models --model-file FILE --check`: proof that an imported net is the file's net, for the user's own file.

The file's own source computes the reference: onnxruntime (the graph as written, unoptimized) for an
ONNX graph, with its dropouts the identity as in inference; Keras itself, in a Keras worker (the `keras-reference`
job), for a Keras file, with its counts. The spec, given the file's own weights (an ONNX file's initializers, a
`.keras` file's layers' weights), runs in each framework's worker (suites.run.forward: every file in one worker per
framework) on the same fixed batch, in inference; each framework's answer is its largest difference from the
reference. `to_json()`'s JSON holds no weights: its proof is Keras's counts.
"""

from __future__ import annotations

import json
import math
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from models.importers.files import load_spec_file
from models.spec import ModelSpec, SpecError
from suites.run.forward import forward_all
from suites.run.orchestrator import worker_environment
from suites.run.registry import ROOT, interpreter

if TYPE_CHECKING:
    from models.importers.onnx_file import OnnxProof

BATCH = 2
RELATIVE_TOLERANCE = 1e-4  # of the reference's largest value (float32 sums over a deep net, in another order):
# relative, since an untrained net's outputs may be tiny (torchvision's efficientnet_b0 at 64x64: about 1e-13)
TIMEOUT_S = 1800.0
KERAS = "keras-tensorflow"  # Keras's own answer: on TensorFlow its eager initializers compile nothing
KERAS_QUIET = {"KERAS_BACKEND": "tensorflow", "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "3"}


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


@dataclass(frozen=True)
class Proof:
    """What a file's check found: the counts where its source counts (a Keras file), the outputs where it holds
    weights."""

    source: str  # what computed the reference
    counts: tuple[tuple[int, int], tuple[int, int]] | None  # (the spec's, the source's) trainable and statistics
    agreements: tuple[Agreement, ...]
    rounding: float | None = None  # how far the source's float32 answer is from its float64 one, relative (Keras)

    @property
    def holds(self) -> bool:
        return (self.counts is None or self.counts[0] == self.counts[1]) and all(a.agrees for a in self.agreements)


def _batch(spec: ModelSpec) -> dict[str, np.ndarray]:
    """A fixed batch in the spec's channels-last layout, and targets for its loss."""
    generator = np.random.default_rng(0)
    inputs = generator.standard_normal((BATCH, *spec.input_shape), dtype=np.float32)
    targets = (generator.integers(0, spec.output_shape[0], BATCH).astype(np.int32) if spec.loss == "cross_entropy"
               else generator.standard_normal((BATCH, *spec.output_shape), dtype=np.float32))
    return {"inputs": inputs, "targets": targets}


def _run(command: list[str], what: str, extra: dict[str, str] | None = None) -> None:
    done = subprocess.run(command, cwd=ROOT, env=worker_environment() | (extra or {}), capture_output=True,
                          text=True, timeout=TIMEOUT_S)
    if done.returncode:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise SpecError(f"{what}: {last}")


def _onnx(proof: OnnxProof, batch: dict[str, np.ndarray], path: str) -> np.ndarray:
    """The graph's own output on the batch, computed by onnxruntime with its graph optimizations off (the graph as
    written; onnx 1.23's reference evaluator rounds googlenet's stride-1 ceil_mode max pool two pixels too large)."""
    import onnxruntime

    inputs = batch["inputs"]
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3  # its warnings (an initializer no node reads) are not the user's to act on
    try:
        session = onnxruntime.InferenceSession(proof.graph.SerializeToString(), options,
                                               providers=["CPUExecutionProvider"])
        (output,) = session.run([proof.scores], {proof.graph.graph.input[0].name: inputs.transpose(0, 3, 1, 2)
                                                 if inputs.ndim == 4 else inputs})
    except Exception as error:  # noqa: BLE001 - any failure of the runtime is one line: the file is not proved
        raise SpecError(f"{path}: onnxruntime could not compute the file, so it cannot be compared: "
                        f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}") from error
    return output.transpose(0, 2, 3, 1) if output.ndim == 4 else output


def _keras_references(files: dict[int, tuple[Path, ModelSpec, dict[str, np.ndarray]]], folder: Path) -> None:
    """Keras's own answer for each Keras file (by index), all in one Keras worker: `keras<index>.npz`."""
    arguments = []
    for index, (path, spec, batch) in files.items():
        np.savez(folder / f"keras-inputs{index}.npz", inputs=batch["inputs"])
        arguments += [str(path.resolve()), str(folder / f"keras-inputs{index}.npz"), str(folder / f"keras{index}.npz"),
                      "1" if spec.loss == "cross_entropy" else "0"]
    if arguments:
        _run([interpreter(KERAS), "-m", "frameworks.worker", "keras-reference", *arguments],
             "Keras could not read the files", KERAS_QUIET)


def _keras(spec: ModelSpec, given: np.lib.npyio.NpzFile) -> tuple[dict | None, np.ndarray | None, tuple]:
    """Keras's weights as the spec's and its output on the batch (a `.keras` file), and its counts."""
    from models.importers.keras_file import canonical_weights

    counts = (int(given["trainable"]), int(given["non_trainable"]))
    if "output" not in given.files:
        return None, None, counts
    layers: dict[str, dict[int, np.ndarray]] = {}
    for key in (key for key in given.files if key.startswith("weights:")):
        layer, index = key.removeprefix("weights:").rsplit(":", 1)
        layers.setdefault(layer, {})[int(index)] = given[key]
    weights = canonical_weights(spec, {layer: [values[i] for i in sorted(values)] for layer, values in layers.items()})
    return weights, given["output"], counts


def check(paths: list[str], frameworks: list[str]) -> dict[str, Proof]:
    """Each file's proof: one Keras worker for every Keras file, one forward worker per framework for every file
    that holds weights."""
    from models.importers.onnx_file import load_onnx_proof

    onnx_proofs = {path: load_onnx_proof(path) for path in paths if Path(path).suffix == ".onnx"}
    specs = [onnx_proofs[path].spec if path in onnx_proofs else load_spec_file(path) for path in paths]
    for path in paths:
        if Path(path).suffix not in (".onnx", ".keras") and not _keras_json(path):
            raise SpecError(f"{path}: a spec file has no source to compare with; --check proves an imported file")
    batches = [_batch(spec) for spec in specs]
    with tempfile.TemporaryDirectory(prefix="footprint-check-") as temporary:
        folder = Path(temporary)
        _keras_references({index: (Path(path), spec, batch) for index, (path, spec, batch)
                           in enumerate(zip(paths, specs, batches, strict=True)) if path not in onnx_proofs}, folder)
        found, nets = [], {}
        for index, (path, spec, batch) in enumerate(zip(paths, specs, batches, strict=True)):
            rounding = None
            if path in onnx_proofs:
                weights, reference, counts = onnx_proofs[path].weights, _onnx(onnx_proofs[path], batch, path), None
            else:
                given = np.load(folder / f"keras{index}.npz")
                weights, reference, counts = _keras(spec, given)
                if "output64" in given.files:
                    rounding = _difference(reference, given["output64"]) / max(float(np.abs(given["output64"]).max()),
                                                                                np.finfo(np.float64).tiny)
            found.append((reference, counts, "onnxruntime" if path in onnx_proofs else "Keras", rounding))
            if weights is not None:
                nets[index] = (spec, batch | weights)
        outputs = dict(zip(nets, forward_all(list(nets.values()), folder, frameworks, _forward), strict=True))
        proofs = {}
        for index, (path, spec, (reference, counts, source, rounding)) in enumerate(zip(paths, specs, found,
                                                                                        strict=True)):
            agreements = () if reference is None else tuple(
                Agreement(framework, _difference(outputs[index][framework]["output"], reference),
                          float(np.abs(reference).max())) for framework in frameworks)
            ours = (spec.param_count, spec.statistics_count)
            proofs[path] = Proof(source, None if counts is None else (ours, counts), agreements, rounding)
        return proofs


def _forward(framework: str, job: list[str]) -> None:
    _run([interpreter(framework), "-m", "frameworks.worker", *job],
         f"{framework}'s worker could not run the imported nets")


def _difference(output: np.ndarray, reference: np.ndarray) -> float:
    """The largest absolute difference; infinite where the shapes differ (never broadcast one onto the other)."""
    return float(np.abs(output - reference).max()) if output.shape == reference.shape else math.inf


def _keras_json(path: str) -> bool:
    from models.importers.keras_file import is_keras_config

    try:
        return Path(path).suffix == ".json" and is_keras_config(json.loads(Path(path).read_text()))
    except (OSError, ValueError):
        return False


def report(proofs: dict[str, Proof]) -> str:
    """A line per file, and one for its counts and each framework under it."""
    lines = []
    for path, proof in proofs.items():
        held = f"the imported net with the file's weights against {proof.source} (a batch of {BATCH}, inference)"
        lines.append(f"{path}: {held if proof.agreements else f'counts against {proof.source} (no weights in it)'}")
        if proof.counts:
            (ours, theirs), same = proof.counts, proof.counts[0] == proof.counts[1]
            lines.append(f"  counts            the spec's {ours[0]:,} trainable + {ours[1]:,} statistics, "
                         f"{proof.source}'s {theirs[0]:,} + {theirs[1]:,}: {'equal' if same else 'DIFFER'}")
        lines += [f"  {each.framework:<17} largest difference {each.difference:.2e} (outputs up to {each.scale:.3g}):"
                  f" {'agrees' if each.agrees else 'DIFFERS' if each.scale else 'all zero, proves nothing'}"
                  for each in proof.agreements]
        if proof.rounding is not None:
            lines.append(f"  {proof.source + ' float64':<17} its own float32 answer is {proof.rounding:.2e} of its "
                         f"largest value from its float64 one: {_rounding_verdict(proof.rounding)}")
    return "\n".join(lines)


def _rounding_verdict(rounding: float) -> str:
    """What the source's own float32-against-float64 difference says of a difference past the tolerance."""
    if rounding <= RELATIVE_TOLERANCE:
        return "within the tolerance, so a difference past it is the import's"
    return "past the tolerance: float32's rounding alone moves this net so far, so float32 cannot prove it"
