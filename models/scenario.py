"""What one measurement is: a model, a framework and the settings every framework must share.

The scenario travels from the orchestrator to the worker as JSON, so it is plain data.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, fields

from models import allocator_modes, backends, executions, techniques
from models.catalogue import is_model_file, load_model
from models.record import RUNNING, SCHEMA_VERSION
from models.spec import ModelSpec, SpecError

SCENARIO_KINDS = ("train", "infer")
OPTIMIZERS = ("sgd", "momentum", "adam")
DTYPES = {"float32": 4}
DEVICES = ("auto", "cpu", "cuda")
PHASES = {
    "train": ("import", "context", "build", "compile", "train_step_1", "train_step_2", "inference"),
    "infer": ("import", "context", "build", "compile", "inference"),
    # not a user's scenario: allocates a known amount, so the suite can check its own figures
    "calibrate": ("import", "context", "allocate"),
}
CALIBRATION_BYTES = 800 * 10**6
# One set of hyperparameters for every framework; the defaults differ (Keras's Adam epsilon is 1e-7).
OPTIMIZER_SETTINGS = {
    "sgd": {"learning_rate": 0.01, "momentum": 0.0},
    "momentum": {"learning_rate": 0.01, "momentum": 0.9},
    "adam": {"learning_rate": 0.001, "beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-8},
}
# Weights start as U(-sqrt(3/fan_in), +sqrt(3/fan_in)) (LeCun uniform), biases at zero, everywhere.
INIT_RULE = "lecun_uniform weights, zero biases"
DATA_RULE = "inputs N(0,1); mse targets N(0,1); cross_entropy labels uniform over classes"


def _choose(value: str, choices: tuple[str, ...] | dict, what: str) -> str:
    if value not in choices:
        raise SpecError(f"unknown {what} {value!r}; valid: {', '.join(choices)}")
    return value


@dataclass(frozen=True)
class Scenario:
    framework: str
    model: str
    kind: str = "train"
    batch: int = 0  # 0: the model's default batch
    optimizer: str = "adam"
    dtype: str = "float32"
    device: str = "cpu"
    allocator: str = "default"  # see models.allocator_modes
    technique: str = "none"  # see models.techniques
    execution: str = executions.DEFAULT  # see models.executions
    cuda_module_loading: str = "LAZY"
    model_file: str | None = None
    spec_json: dict | None = None  # the spec itself, so a worker never depends on the caller's files

    def __post_init__(self) -> None:
        _choose(self.kind, PHASES, "scenario")
        _choose(self.optimizer, OPTIMIZERS, "optimizer")
        _choose(self.dtype, DTYPES, "dtype")
        _choose(self.device, DEVICES, "device")
        _choose(self.technique, techniques.TECHNIQUES, "technique")
        _choose(self.cuda_module_loading, allocator_modes.CUDA_MODULE_LOADING, "CUDA module loading")
        allocator_modes.parse(self.framework, self.allocator)
        executions.resolve(self.framework, self.execution)
        if isinstance(self.batch, bool) or not isinstance(self.batch, int) or self.batch < 0:
            raise SpecError(f"batch must be a positive integer, got {self.batch!r}")
        if self.technique == "accumulate" and self.batch % techniques.ACCUMULATION_STEPS:
            raise SpecError(f"accumulate splits the batch into {techniques.ACCUMULATION_STEPS} micro-batches: "
                            f"batch {self.batch} does not divide")

    @classmethod
    def create(cls, framework: str, model: str | None = None, model_file: str | None = None,
               **settings: object) -> Scenario:
        """Resolves the model (catalogue name or model file, which `model` may name too) and fixes the batch, once, in
        the caller. A model from a file is known by its path: two files of one name (d1/model.onnx, d2/model.onnx)
        are two models, in every row and record."""
        if model_file is None and model and is_model_file(model):
            model, model_file = None, model
        spec = load_model(model_file or model or "")
        batch = settings.pop("batch", 0) or spec.default_batch
        return cls(framework=framework, model=model_file or spec.name, model_file=model_file,
                   spec_json=spec.to_dict(), batch=batch, **settings)  # type: ignore[arg-type]

    @property
    def spec(self) -> ModelSpec:
        return _parsed(json.dumps(self.spec_json, sort_keys=True))

    @property
    def unavailable(self) -> str | None:
        """Why this scenario's technique or execution mode cannot run here, or None."""
        return (techniques.unavailable(self.framework, self.technique, self.kind, self.device, self.spec)
                or executions.unavailable(self.framework, self.execution, self.device))

    @property
    def execution_mode(self) -> str:
        """The framework's own name for how it runs the net (`default` resolved)."""
        return executions.resolve(self.framework, self.execution)

    @property
    def phases(self) -> tuple[str, ...]:
        return PHASES[self.kind]

    def bare_record(self) -> dict:
        """The fields every record has, from the scenario alone: the worker starts from them, and a record cut
        short before the worker wrote (a timeout, a kill) still has them."""
        spec = self.spec
        return {"schema_version": SCHEMA_VERSION, "status": RUNNING, "failure": None, "scenario": self.to_dict(),
                "model": {"name": self.model, "param_count": spec.param_count,
                          "statistics_count": spec.statistics_count, "weight_bytes": spec.weight_bytes(),
                          "input_shape": list(spec.input_shape), **_outputs(spec)},
                "framework": {"name": self.framework}, "allocator": self.allocator_settings, "phases": [],
                "current_phase": None}

    @property
    def label(self) -> str:
        return (f"{self.framework} {self.model} {self.kind} b{self.batch} {self.optimizer} {self.device}"
                f" allocator={self.allocator} technique={self.technique} execution={self.execution_mode}")

    @property
    def variant_parts(self) -> list[str]:
        """The framework and whatever run setting differs from the defaults."""
        default_batch = (self.spec_json or {}).get("default_batch", self.batch)
        extras = [f"b{self.batch}" if self.batch != default_batch else "",
                  self.technique if self.technique != "none" else "",
                  self.execution if self.execution != executions.DEFAULT else "",
                  self.optimizer if self.kind == "train" and self.optimizer != "adam" else "",
                  self.allocator if self.allocator != "default" else "",
                  self.cuda_module_loading if self.cuda_module_loading != "LAZY" else ""]
        return [self.framework, *filter(None, extras)]

    @property
    def variant(self) -> str:
        """One column of a report."""
        return " ".join(self.variant_parts)

    @property
    def allocator_settings(self) -> dict:
        """The allocator mode's variables for this device, or why it does not apply."""
        return allocator_modes.settings(self.framework, self.allocator, self.cuda_module_loading, self.device)

    @property
    def preallocates(self) -> bool:
        """The driver sees a pool mapped at start (JAX's and TensorFlow's defaults on a GPU), not the model."""
        return allocator_modes.preallocates(self.framework, self.allocator, self.device)

    def to_dict(self) -> dict:
        """Its fields, the spec's JSON a copy (a caller may change what it is given); what asdict gives, without its
        deep copy of every number and string, a third of the time a run file took to read."""
        return {field.name: getattr(self, field.name) for field in fields(self)} | {
            "spec_json": _copied(self.spec_json)}

    @classmethod
    def from_dict(cls, data: dict) -> Scenario:
        return cls(**data | {"framework": backends.current(data["framework"])})


@functools.lru_cache(maxsize=256)
def _parsed(spec_text: str) -> ModelSpec:
    """A spec parsed once per process (a ModelSpec is immutable): a run file's records repeat a few specs, and every
    reader of a record asks for its spec several times."""
    return ModelSpec.from_dict(json.loads(spec_text))


def _copied(value: object) -> object:
    """JSON data copied: new dicts, lists and tuples; numbers, strings and None are immutable, so shared."""
    if isinstance(value, dict):
        return {key: _copied(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_copied(item) for item in value)
    return value


def _outputs(spec: ModelSpec) -> dict[str, object]:
    """The loss every framework trains with, and `output_shape` of a net of one output, as records have always had
    it; `output_shapes` of a net of several, whose loss is one per output, equally weighted and summed."""
    shapes = [list(shape) for shape in spec.output_shapes]
    if len(shapes) == 1:
        return {"loss": spec.loss, "output_shape": shapes[0]}
    return {"loss": f"{spec.loss} per output, equally weighted, summed", "output_shapes": shapes}
