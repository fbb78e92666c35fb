"""Allocator modes: how each framework may be told to manage GPU memory, as pure data.

A mode is set before the framework is imported (environment variables, set by the orchestrator)
or, where the framework has no variable for it, by the adapter before the device starts
(TensorFlow's memory limit). On the CPU no mode applies, and the record says so. These are the modes a run is
told to use; the allocators the estimate simulates are models/estimate/bfc.py and models/estimate/caching.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from models import backends
from models.spec import SpecError

CUDA_MODULE_LOADING = ("LAZY", "EAGER")


@dataclass(frozen=True)
class Mode:
    description: str
    env: dict[str, str]
    value: str = ""  # the name of the mode's parameter ("MB", "F"), or "" for none
    example: str = ""  # the value the allocators suite runs it with
    preallocates: bool = False  # maps a pool when the device starts: the driver then sees the pool, not the model
    counted: bool = True  # the allocator's statistics count memory in this mode (torch's stay at zero without caching)
    pool_off: bool = False  # the mode that turns off the framework's default pool: what the process holds without it


MODES: dict[str, dict[str, Mode]] = {
    "torch": {
        "default": Mode("caching allocator: freed blocks stay reserved for reuse", {}),
        "expandable": Mode("expandable segments: reserved memory grows in place",
                           {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}),
        "nocache": Mode("no caching: every free goes back to the driver (the allocator's statistics stay at zero)",
                        {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}, counted=False),
        "fraction": Mode("caps the caching allocator at fraction F of GPU memory "
                         "(torch.cuda.set_per_process_memory_fraction)", {}, "F", "0.3"),
    },
    "tensorflow": {
        "default": Mode("maps nearly all GPU memory when the device starts", {}, preallocates=True),
        "growth": Mode("allow_growth: maps memory as it is needed", {"TF_FORCE_GPU_ALLOW_GROWTH": "true"},
                       pool_off=True),
        "limit": Mode("a logical GPU with a memory limit of MB MiB (TensorFlow's memory_limit counts 2**20 bytes), "
                      "mapped when the device starts", {}, "MB",
                      "4096", preallocates=True),
        "async": Mode("CUDA's stream-ordered allocator (cudaMallocAsync)", {"TF_GPU_ALLOCATOR": "cuda_malloc_async"}),
    },
    "jax": {
        "default": Mode("preallocates 75% of GPU memory when the backend starts", {}, preallocates=True),
        "noprealloc": Mode("no preallocation: the pool grows as needed", {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"},
                           pool_off=True),
        "fraction": Mode("preallocates fraction F of GPU memory",
                         {"XLA_PYTHON_CLIENT_MEM_FRACTION": "{value}"}, "F", "0.3", preallocates=True),
        "platform": Mode("no pool: cudaMalloc and cudaFree for every buffer",
                         {"XLA_PYTHON_CLIENT_ALLOCATOR": "platform"}),
    },
}


DEFAULT_ONLY = {"default": Mode("the framework's own default", {})}


def _modes(framework: str) -> dict[str, Mode]:
    """A framework's modes are its backend's (Keras on JAX has JAX's); one with no entry has its default only."""
    return MODES.get(backends.backend(framework), DEFAULT_ONLY)


def mode_names(framework: str) -> list[str]:
    """The modes as a user writes them: `limit=MB`, `fraction=F`."""
    return [f"{name}={mode.value}" if mode.value else name for name, mode in _modes(framework).items()]


def examples(framework: str) -> list[str]:
    """Every mode of a framework in a runnable form: `limit=4096` for `limit=MB`."""
    return [f"{name}={mode.example}" if mode.value else name for name, mode in _modes(framework).items()]


def parse(framework: str, text: str) -> tuple[str, str]:
    """(mode, value) from `growth` or `limit=2048`; a SpecError naming the valid modes otherwise."""
    name, _, value = text.partition("=")
    mode = _modes(framework).get(name)
    valid = f"valid for {framework}: {', '.join(mode_names(framework))}"
    if mode is None or bool(mode.value) != bool(value):
        raise SpecError(f"unknown allocator mode {text!r}; {valid}")
    if mode.value == "MB" and not (value.isdigit() and int(value) > 0):
        raise SpecError(f"allocator mode {text!r} needs a whole number of megabytes; {valid}")
    if mode.value == "F":
        try:
            fraction = float(value)
        except ValueError:
            fraction = 0.0
        if not 0 < fraction <= 1:
            raise SpecError(f"allocator mode {text!r} needs a fraction in (0, 1]; {valid}")
    return name, value


def without_pool(framework: str) -> str | None:
    """The mode that turns off a framework's default pool (JAX's noprealloc, TensorFlow's growth); None where its
    default maps no pool."""
    modes = _modes(framework)
    if not modes["default"].preallocates:
        return None
    return next(name for name, mode in modes.items() if mode.pool_off)


def is_without_pool(framework: str, text: str) -> bool:
    """Whether a run's mode is its framework's default with the pool turned off."""
    return _modes(framework)[parse(framework, text)[0]].pool_off


def preallocates(framework: str, text: str, device: str) -> bool:
    """Whether the driver's figure for this run is a preallocated pool rather than what the model uses."""
    return device == "cuda" and _modes(framework)[parse(framework, text)[0]].preallocates


def counted(framework: str, text: str) -> bool:
    """Whether the framework's allocator statistics mean anything in this mode."""
    return _modes(framework)[parse(framework, text)[0]].counted


# On the CPU the host is the device. glibc's malloc raises its mmap threshold (up to 32 MiB) each time a large block
# is freed, after which blocks below it come from the heap and stay in the process when freed: the RSS then
# follows the heap's high-water mark, not the tensors alive (ResNet-50 at batch 8 in torch: 1,598 MiB held at
# inference after training against 802 with the threshold fixed). A fixed threshold returns every freed block of
# 64 KiB or more to the system, so the CPU's driver view shows what the framework holds now.
HOST_MALLOC = {"MALLOC_MMAP_THRESHOLD_": "65536"}


def settings(framework: str, text: str, module_loading: str, device: str) -> dict:
    """What the mode means for this run: its variables, or why it does not apply."""
    name, value = parse(framework, text)
    mode = _modes(framework)[name]
    if device != "cuda":
        return {"mode": text, "applicable": False, "reason": "allocator modes and CUDA module loading "
                "apply to GPU memory only; this run is on the CPU", "env": dict(HOST_MALLOC)}
    env = {key: template.replace("{value}", value) for key, template in mode.env.items()}
    return {"mode": text, "applicable": True, "description": mode.description, "preallocates": mode.preallocates,
            "env": env | {"CUDA_MODULE_LOADING": module_loading}}
