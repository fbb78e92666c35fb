"""`models --model-file FILE --check`: proof that an imported net is the file's net, for the user's own file.

The file's own source computes the reference: onnxruntime (the graph as written, unoptimized) for an
ONNX graph, with its dropouts the identity as in inference; Keras itself, in a Keras worker (the `keras-reference`
job), for a Keras file, with its counts. The spec, given the file's own weights (an ONNX file's initializers, a
`.keras` file's layers' weights), runs in each framework's worker (suites.run.forward: every file in one worker per
framework) on the same fixed batch, in inference; each framework's answer is its largest difference from the
reference. `to_json()`'s JSON holds no weights: its proof is Keras's counts.

The batch is the file's own where its graph fixes one (`torch.onnx.export(net, x, f)` with no dynamic axes: x's
batch), else BATCH. A file that cannot be proved (it does not import, onnxruntime cannot compute it) is refused
alone, in one line, before any worker starts, and the other files are proved.
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
from models.protocol import in_order, numbered
from models.spec import ModelSpec, SpecError
from suites.run.forward import forward_all
from suites.run.orchestrator import worker_environment
from suites.run.registry import ROOT, interpreter

if TYPE_CHECKING:
    from models.importers.onnx_file import OnnxProof

BATCH = 2  # where the file's graph leaves the batch open
RELATIVE_TOLERANCE = 1e-4  # of the reference's largest value (float32 sums over a deep net, in another order):
# relative, since an untrained net's outputs may be tiny (torchvision's efficientnet_b0 at 64x64: about 1e-13)
TIMEOUT_S = 1800.0
# Where a framework differs from onnxruntime past the tolerance, torch computes the rebuild in float64 too (onnxruntime
# has no float64 conv): a net that amplifies float32's rounding (an untrained deep net can) moves its float32 answers
# from the exact one by about its own rounding, so each float32 answer, onnxruntime's and every framework's, is held
# within ROUNDING_FACTOR times the rebuild's own float32-from-float64 distance of the float64 rebuild; a rebuild
# wrong by a layer is off by far more
ROUNDING_FACTOR = 4
EXACT = "torch"  # the framework that computes the rebuild in float64
KERAS = "keras-tensorflow"  # Keras's own answer: on TensorFlow its eager initializers compile nothing
KERAS_QUIET = {"KERAS_BACKEND": "tensorflow", "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "3"}


@dataclass(frozen=True)
class Agreement:
    """One framework's output against the reference, for one file; past the tolerance, its and the reference's
    distances from the float64 rebuild, and the rebuild's own float32 rounding (`Rounding`)."""

    framework: str
    difference: float  # the largest absolute difference
    scale: float  # the reference's largest absolute value
    rounding: Rounding | None = None

    @property
    def within_tolerance(self) -> bool:
        """Within the tolerance of outputs that are not all zero (zeros agree with anything a net of zeros says)."""
        return self.scale > 0 and self.difference <= RELATIVE_TOLERANCE * self.scale

    @property
    def agrees(self) -> bool:
        """Within the tolerance, or where the net amplifies float32's rounding past it, within its rounding."""
        return self.within_tolerance or (self.scale > 0 and self.rounding is not None and self.rounding.holds(self))


@dataclass(frozen=True)
class Rounding:
    """The float64 rebuild against the float32 answers: the rebuild's own float32 answer's distance from it (how far
    float32's rounding moves this net), the reference's, and each framework's (by name)."""

    own: float
    reference: float
    frameworks: dict[str, float]

    def holds(self, agreement: Agreement) -> bool:
        """Both the reference and this framework within ROUNDING_FACTOR times the net's own rounding of the float64
        rebuild: the two differ by rounding alone."""
        bound = ROUNDING_FACTOR * self.own
        return self.reference <= bound and self.frameworks[agreement.framework] <= bound


@dataclass(frozen=True)
class Proof:
    """What a file's check found: the counts where its source counts (a Keras file), the outputs where it holds
    weights."""

    source: str  # what computed the reference
    counts: tuple[tuple[int, int], tuple[int, int]] | None  # (the spec's, the source's) trainable and statistics
    agreements: tuple[Agreement, ...]
    batch: int  # the examples fed
    rounding: float | None = None  # how far the source's float32 answer is from its float64 one, relative (Keras)

    @property
    def holds(self) -> bool:
        return (self.counts is None or self.counts[0] == self.counts[1]) and all(a.agrees for a in self.agreements)


@dataclass(frozen=True)
class Ready:
    """A file that imported, with what its proof needs: the batch it is fed, and for an ONNX file its weights and
    onnxruntime's answer (a Keras file's come from a Keras worker)."""

    path: str
    spec: ModelSpec
    batch: dict[str, np.ndarray]
    weights: dict[str, np.ndarray] | None = None
    reference: list[np.ndarray] | None = None  # onnxruntime's outputs; None: Keras's, from its worker


def _batch(spec: ModelSpec, size: int = BATCH) -> dict[str, np.ndarray]:
    """A fixed batch of `size` in the spec's channels-last layout, and targets for its loss, one per output."""
    generator = np.random.default_rng(0)
    inputs = generator.standard_normal((size, *spec.input_shape), dtype=np.float32)
    targets = [generator.integers(0, shape[0], size).astype(np.int32) if spec.loss == "cross_entropy"
               else generator.standard_normal((size, *shape), dtype=np.float32) for shape in spec.output_shapes]
    return {"inputs": inputs, **numbered("targets", targets)}


def _file_batch(proof: OnnxProof) -> int:
    """The batch the graph's input fixes (an export with no dynamic axes: its example's), else BATCH: onnxruntime
    refuses any other batch for a fixed one."""
    return proof.graph.graph.input[0].type.tensor_type.shape.dim[0].dim_value or BATCH


def _run(command: list[str], what: str, extra: dict[str, str] | None = None) -> None:
    done = subprocess.run(command, cwd=ROOT, env=worker_environment() | (extra or {}), capture_output=True,
                          text=True, timeout=TIMEOUT_S)
    if done.returncode:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise SpecError(f"{what}: {last}")


def _onnx(proof: OnnxProof, batch: dict[str, np.ndarray], path: str) -> list[np.ndarray]:
    """The graph's own outputs on the batch, computed by onnxruntime with its graph optimizations off (the graph as
    written; onnx 1.23's reference evaluator rounds googlenet's stride-1 ceil_mode max pool two pixels too large)."""
    import onnxruntime

    inputs = batch["inputs"]
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3  # its warnings (an initializer no node reads) are not the user's to act on
    try:
        session = onnxruntime.InferenceSession(proof.graph.SerializeToString(), options,
                                               providers=["CPUExecutionProvider"])
        outputs = session.run(list(proof.scores), {proof.graph.graph.input[0].name: inputs.transpose(0, 3, 1, 2)
                                                   if inputs.ndim == 4 else inputs})
    except Exception as error:  # noqa: BLE001 - any failure of the runtime is one line: the file is not proved
        raise SpecError(f"{path}: onnxruntime could not compute the file, so it cannot be compared: "
                        f"{type(error).__name__}: {' '.join(str(error).split())}") from error
    return [output.transpose(0, 2, 3, 1) if output.ndim == 4 else output for output in outputs]


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


def _keras(spec: ModelSpec, given: np.lib.npyio.NpzFile) -> tuple[dict | None, list[np.ndarray] | None, tuple]:
    """Keras's weights as the spec's and its outputs on the batch (a `.keras` file), and its counts."""
    from models.importers.keras_file import canonical_weights

    counts = (int(given["trainable"]), int(given["non_trainable"]))
    if "output0" not in given.files:
        return None, None, counts
    layers: dict[str, dict[int, np.ndarray]] = {}
    for key in (key for key in given.files if key.startswith("weights:")):
        layer, index = key.removeprefix("weights:").rsplit(":", 1)
        layers.setdefault(layer, {})[int(index)] = given[key]
    weights = canonical_weights(spec, {layer: [values[i] for i in sorted(values)] for layer, values in layers.items()})
    return weights, in_order("output", given), counts


def check(paths: list[str], frameworks: list[str]) -> dict[str, Proof]:
    """Every file's proof, or the first file's refusal raised before any worker starts (the zoo takes that file
    out and checks the rest)."""
    ready, refused = prepare(paths)
    if refused:
        raise SpecError(next(iter(refused.values())))
    return prove(ready, frameworks)


def prepare(paths: list[str]) -> tuple[list[Ready], dict[str, str]]:
    """The files that import, each with its batch and an ONNX file's reference, and each other file's refusal (one
    line, by path): known before any worker starts, so one file refused stops none of the others."""
    ready, refused = [], {}
    for path in paths:
        try:
            ready.append(_ready(path))
        except SpecError as error:
            refused[path] = str(error)
    return ready, refused


def _ready(path: str) -> Ready:
    from models.importers.onnx_file import load_onnx_proof

    if Path(path).suffix == ".onnx":
        proof = load_onnx_proof(path)
        batch = _batch(proof.spec, _file_batch(proof))
        return Ready(path, proof.spec, batch, proof.weights, _onnx(proof, batch, path))
    spec = load_spec_file(path)
    if Path(path).suffix != ".keras" and not _keras_json(path):
        raise SpecError(f"{path}: a spec file has no source to compare with; --check proves an imported file")
    return Ready(path, spec, _batch(spec))


def prove(files: list[Ready], frameworks: list[str]) -> dict[str, Proof]:
    """Each file's proof: one Keras worker for every Keras file, one forward worker per framework for every file
    that holds weights."""
    with tempfile.TemporaryDirectory(prefix="footprint-check-") as temporary:
        folder = Path(temporary)
        _keras_references({index: (Path(file.path), file.spec, file.batch) for index, file in enumerate(files)
                           if file.reference is None}, folder)
        found, nets = [], {}
        for index, file in enumerate(files):
            weights = file.weights
            if file.reference is not None:
                found.append((file.reference, None, "onnxruntime", None))
            else:
                given = np.load(folder / f"keras{index}.npz")
                weights, reference, counts = _keras(file.spec, given)
                found.append((reference, counts, "Keras", _rounding(reference, given)))
            if weights is not None:
                nets[index] = (file.spec, file.batch | weights)
        outputs = dict(zip(nets, forward_all(list(nets.values()), folder, frameworks, _forward), strict=True))
        touchy = {index: nets[index] for index, (reference, _, source, _) in enumerate(found)
                  if source == "onnxruntime" and index in nets and EXACT in frameworks and any(
                      _difference(in_order("output", outputs[index][framework]), reference) > RELATIVE_TOLERANCE
                      * _largest(reference) for framework in frameworks)}
        exact = dict(zip(touchy, forward_all([(spec, arrays | {"float64": np.array(True)}) for spec, arrays in
                                              touchy.values()], folder / "float64", [EXACT], _forward), strict=True))
        proofs = {}
        for index, (file, (reference, counts, source, rounding)) in enumerate(zip(files, found, strict=True)):
            wide = _rounded(outputs[index], reference, in_order("output", exact[index][EXACT])) \
                if index in exact else None
            agreements = () if reference is None else tuple(
                Agreement(framework, _difference(in_order("output", outputs[index][framework]), reference),
                          _largest(reference), wide) for framework in frameworks)
            ours = (file.spec.param_count, file.spec.statistics_count)
            proofs[file.path] = Proof(source, None if counts is None else (ours, counts), agreements,
                                      len(file.batch["inputs"]), rounding)
        return proofs


def _rounded(outputs: dict[str, dict[str, np.ndarray]], reference: list[np.ndarray],
             exact: list[np.ndarray]) -> Rounding:
    """The float64 rebuild's distances from the float32 answers, relative to its largest value."""
    scale = max(_largest(exact), np.finfo(np.float64).tiny)
    return Rounding(_difference(in_order("output", outputs[EXACT]), exact) / scale,
                    _difference(reference, exact) / scale,
                    {name: _difference(in_order("output", result), exact) / scale for name, result in outputs.items()})


def _rounding(reference: list[np.ndarray] | None, given: np.lib.npyio.NpzFile) -> float | None:
    """How far Keras's float32 answer is from its float64 one, relative to the latter's largest value; None where
    Keras computed no float64 answer."""
    wide = in_order("float64_output", given)
    if reference is None or not wide:
        return None
    return _difference(reference, wide) / max(_largest(wide), np.finfo(np.float64).tiny)


def _forward(framework: str, job: list[str]) -> None:
    _run([interpreter(framework), "-m", "frameworks.worker", *job],
         f"{framework}'s worker could not run the imported nets")


def _difference(outputs: list[np.ndarray], references: list[np.ndarray]) -> float:
    """The largest absolute difference over every output of the net; infinite where a shape or the number of outputs
    differs (never broadcast one onto the other)."""
    if [output.shape for output in outputs] != [reference.shape for reference in references]:
        return math.inf
    return max(float(np.abs(output - reference).max()) for output, reference in zip(outputs, references, strict=True))


def _largest(arrays: list[np.ndarray]) -> float:
    """The largest absolute value over every output: one scale for the net's tolerance (an FPN's levels are alike)."""
    return max(float(np.abs(array).max()) for array in arrays)


def _keras_json(path: str) -> bool:
    from models.importers.keras_file import is_keras_config

    try:
        return Path(path).suffix == ".json" and is_keras_config(json.loads(Path(path).read_text()))
    except (OSError, ValueError):
        return False


def report(proofs: dict[str, Proof], refused: list[str]) -> str:
    """A line per file proved, and one for its counts and each framework under it; then one line of how many files
    were checked, naming each not proved and each refused (whose own lines are the caller's)."""
    lines = []
    for path, proof in proofs.items():
        held = f"the imported net with the file's weights against {proof.source} (a batch of {proof.batch}, inference)"
        lines.append(f"{path}: {held if proof.agreements else f'counts against {proof.source} (no weights in it)'}")
        if proof.counts:
            (ours, theirs), same = proof.counts, proof.counts[0] == proof.counts[1]
            lines.append(f"  counts            the spec's {ours[0]:,} trainable + {ours[1]:,} statistics, "
                         f"{proof.source}'s {theirs[0]:,} + {theirs[1]:,}: {'equal' if same else 'DIFFER'}")
        lines += [f"  {each.framework:<17} largest difference {each.difference:.2e} (outputs up to {each.scale:.3g}):"
                  f" {_verdict(each)}" for each in proof.agreements]
        rounded = next((each.rounding for each in proof.agreements if each.rounding), None)
        if rounded:
            lines.append(f"  {EXACT + ' float64':<17} the rebuild's float32 answer is {rounded.own:.2e} from its "
                         f"float64 one, {proof.source}'s {rounded.reference:.2e}: {_rebuild_verdict(rounded)}")
        if proof.rounding is not None:
            lines.append(f"  {proof.source + ' float64':<17} its own float32 answer is {proof.rounding:.2e} of its "
                         f"largest value from its float64 one: {_rounding_verdict(proof.rounding)}")
    return "\n".join([*lines, _summary(proofs, refused)])


def _summary(proofs: dict[str, Proof], refused: list[str]) -> str:
    unproved = [path for path, proof in proofs.items() if not proof.holds]
    count = len(proofs) + len(refused)
    groups = [f"{len(proofs) - len(unproved)} proved", *(f"{len(names)} {what}: {', '.join(names)}" for what, names
                                                          in (("not proved", unproved), ("refused", refused)) if names)]
    return f"checked {count} file{'' if count == 1 else 's'}: {'; '.join(groups)}"


def _verdict(each: Agreement) -> str:
    if not each.scale:
        return "all zero, proves nothing"
    if each.within_tolerance:
        return "agrees"
    return "agrees within float32's rounding (below)" if each.agrees else "DIFFERS"


def _rebuild_verdict(rounded: Rounding) -> str:
    """What the float64 rebuild says of a difference past the tolerance."""
    bound = ROUNDING_FACTOR * rounded.own
    if rounded.reference <= bound:
        return f"within {ROUNDING_FACTOR}x it: a framework as close computes the file's net"
    return f"past {ROUNDING_FACTOR}x it: the rebuild is not the file's net"


def _rounding_verdict(rounding: float) -> str:
    """What the source's own float32-against-float64 difference says of a difference past the tolerance."""
    if rounding <= RELATIVE_TOLERANCE:
        return "within the tolerance, so a difference past it is the import's"
    return "past the tolerance: float32's rounding alone moves this net so far, so float32 cannot prove it"
