"""The suites: which scenarios each one runs, narrowed by the FOOTPRINT_* variables `make bench` sets.

A suite is `suites/bench_<name>.py` plus its entry here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from models import allocator_modes, executions, techniques
from models.catalogue import KIND_COST_PROBES, load_model
from models.scenario import SCENARIO_KINDS, Scenario
from models.spec import SpecError
from suites.analysis.constants import FIRST_PROBES
from suites.run import device
from suites.run.registry import frameworks
from suites.run.runfile import identity


@dataclass(frozen=True)
class Part:
    """One cross product of a suite: models x kinds x batches x techniques x optimizers x frameworks
    (x allocator modes) (x execution modes) x module loadings. Batch 0 is the model's own."""

    models: tuple[str, ...]
    kinds: tuple[str, ...] = SCENARIO_KINDS
    every_allocator_mode: bool = False
    module_loadings: tuple[str, ...] = ("LAZY",)
    optimizers: tuple[str, ...] = ("adam",)
    techniques: tuple[str, ...] = ("none",)
    batches: tuple[int, ...] = (0,)
    every_execution_mode: bool = False
    without_pool: bool = False  # on a GPU, a pooling framework also with its pool off (what it holds without it)


DOUBLING_BATCHES = tuple(2**power for power in range(9))  # 1 to 256
DEPTHS = tuple(f"plain-{2**power}" for power in range(3, 9))  # 8 to 256
TECHNIQUE_MODEL, TECHNIQUE_BATCH = "plain-16", 16
# Story 2's tricks on the nets they are about, at the real nets' catalogue batch (8; see the catalogue)
REAL_NET_TECHNIQUES = ("none", "inplace", "checkpoint", "bnrelu", "efficient", "accumulate")
RESNET_BATCHES = (2, 4, 8, 16)
# the probes of one layer kind each (models.catalogue): cuDNN's conv workspace apart from cuBLAS's, and the kernels
# batch norm and pooling load
KIND_PROBES = ("probe-conv", "probe-dense", "probe-norm", "probe-pool")


@dataclass(frozen=True)
class Question:
    """A story's "does it fit?": the fit suite answers it per framework by bisection (suites.analysis.fit)."""

    story: str
    model: str
    kind: str
    budget: str
    optimizer: str = "adam"
    technique: str = "none"
    max_batch: int = 4096  # bounds the search's compute: keras200m costs about 20 GFLOP per example and step


STORY_3 = "story 3: does keras200m train on a 2 GB card?"
FIT_QUESTIONS = (
    Question(STORY_3, "keras200m", "train", "2GiB", max_batch=16),
    Question(STORY_3, "keras200m", "train", "2GiB", optimizer="sgd", max_batch=16),
    Question(STORY_3, "keras200m", "train", "2GiB", optimizer="sgd", technique="bf16", max_batch=16),
    Question("story 1: does heatmap68 infer on a 900 MB card?", "heatmap68", "infer", "900MB"),
)


SUITES: dict[str, tuple[Part, ...]] = {
    # story 3 (keras200m, train and infer), story 1 (heatmap68, inference only) and the net people train
    # (resnet50 at batch 8, train and infer: batch norm, residuals, activations larger than the weights);
    # keras-small is measured across batches by the sweeps suite. Sized to finish within 8 minutes on the
    # 2-core CPU machine and near 5 on a GPU box with every framework (docs/usage.md: how long each suite takes).
    # On a GPU each pooling framework runs again with its pool off: what a framework takes by default (its pool),
    # what it holds without the pool and what the model needs are three figures (the headline's columns).
    "default": (Part(models=("keras200m",), without_pool=True),
                Part(models=("heatmap68",), kinds=("infer",), without_pool=True),
                Part(models=("resnet50",), without_pool=True)),
    "allocators": (
        Part(models=("keras200m", "heatmap68"), kinds=("train",), every_allocator_mode=True),
        # the context alone, with CUDA's lazy and eager module loading
        Part(models=("heatmap68",), kinds=("infer",), module_loadings=("LAZY", "EAGER")),
    ),
    "techniques": (
        Part(models=(TECHNIQUE_MODEL,), kinds=("train",), batches=(TECHNIQUE_BATCH,),
             techniques=("none", "inplace", "checkpoint", "fp16", "bf16", "accumulate", "empty_cache")),
        Part(models=(TECHNIQUE_MODEL,), kinds=("train",), batches=(TECHNIQUE_BATCH,), optimizers=("sgd", "momentum")),
        Part(models=(TECHNIQUE_MODEL,), kinds=("infer",), batches=(TECHNIQUE_BATCH,), techniques=("none", "tracked")),
        Part(models=("resnet50", "densenet121"), kinds=("train",), techniques=REAL_NET_TECHNIQUES),
    ),
    "sweeps": (
        Part(models=("keras-small",), kinds=("train",), batches=DOUBLING_BATCHES),
        Part(models=DEPTHS, kinds=("train",), techniques=("none", "checkpoint")),
        Part(models=("resnet50",), kinds=("train",), batches=RESNET_BATCHES),
    ),
    # every framework's execution modes (models.executions): story 1's net trained and inferred, and story 3's
    # keras200m inferred. resnet50 is left out: on the 2-core CPU torch.compile of its training step alone took
    # 147 s at batch 2 (cold cache), and the suite must finish within 10 minutes there (docs/usage.md).
    "compile": (Part(models=("heatmap68",), every_execution_mode=True),
                Part(models=("keras200m",), kinds=("infer",), every_execution_mode=True)),
    "fit": (),  # questions, not scenarios: FIT_QUESTIONS
    # every probe the estimate needs, train and infer: the constants' two (which every suite runs first) and one per
    # layer kind (KIND_PROBES), and on a GPU each again with a pooling framework's pool off, so that what a
    # framework holds without its pool is measured for each (the suite a GPU box runs for the estimate).
    "probes": (Part(models=(*FIRST_PROBES, *KIND_PROBES), without_pool=True),),
    # the kind probes' training step: what one layer of each kind costs a compiling framework beyond its tensors
    # (suites.analysis.kind_costs); apart from the probes suite, whose GPU check it would outgrow (51 scenarios)
    "kinds": (Part(models=KIND_COST_PROBES, kinds=("train",)),),
}


def _listed(variable: str, default: tuple[str, ...], valid: list[str] | None, what: str) -> tuple[str, ...]:
    names = tuple(name for name in os.environ.get(variable, "").split(",") if name) or default
    for name in names:
        if valid is not None and name not in valid:
            raise SpecError(f"unknown {what} {name!r}; valid: {', '.join(valid)}")
    return names


def suite_settings(name: str) -> tuple[tuple[Part, ...], tuple[str, ...], tuple[str, ...] | None, str]:
    """(parts, frameworks, models or None for the suite's own, device) after the FOOTPRINT_* variables."""
    if name not in SUITES:
        raise SpecError(f"unknown suite {name!r}; valid: {', '.join(SUITES)}")
    chosen_frameworks = _listed("FOOTPRINT_FRAMEWORKS", tuple(frameworks()), frameworks(), "framework")
    models = _listed("FOOTPRINT_MODELS", (), None, "model") or None
    for model in models or ():
        load_model(model)  # raises with the valid names, or the file's one-line error
    asked = sorted({question.model for question in FIT_QUESTIONS})
    if name == "fit" and models and not set(models) & set(asked):
        raise SpecError(f"the fit suite answers the stories' questions, about {' and '.join(asked)}, and --models "
                        f"names neither; for any model: python -m suites fit --model NAME_OR_FILE --framework F "
                        f"--budget SIZE")
    return SUITES[name], chosen_frameworks, models, device.resolve(os.environ.get("FOOTPRINT_DEVICE", "auto"))


def batch_grid(parts: tuple[Part, ...]) -> tuple[int, ...] | None:
    """A user's batch grid (`bench --batches 10,20,30`), which replaces the batches of the parts that sweep the
    batch; None: the suite's own."""
    text = os.environ.get("FOOTPRINT_BATCHES", "")
    if not text:
        return None
    if not any(len(part.batches) > 1 for part in parts):
        raise SpecError("--batches replaces a batch sweep, and this suite sweeps no batch (the sweeps suite does)")
    try:
        grid = tuple(int(item) for item in text.split(","))
    except ValueError:
        grid = ()
    if not grid or min(grid) < 1:
        raise SpecError(f"--batches must be positive integers separated by commas, got {text!r}")
    return grid


def scenarios(name: str) -> list[Scenario]:
    """The probes of each framework first (their constants feed the estimates of the rest), then the suite."""
    parts, chosen_frameworks, models, resolved = suite_settings(name)
    grid, chosen_techniques = batch_grid(parts), technique_filter(parts)
    probes = [Scenario.create(framework, probe, kind=kind, device=resolved)
              for probe in FIRST_PROBES for kind in SCENARIO_KINDS for framework in chosen_frameworks if parts]
    return _once(probes + [Scenario.create(framework, model, kind=kind, optimizer=optimizer, device=resolved,
                                     allocator=mode, cuda_module_loading=loading, technique=technique, batch=batch,
                                     execution=execution)
                     for part in parts for model in (models or part.models) for kind in part.kinds
                     for batch in (grid if grid and len(part.batches) > 1 else part.batches)
                     for technique in part.techniques if not chosen_techniques or technique in chosen_techniques
                     for optimizer in part.optimizers
                     for framework in chosen_frameworks
                     for execution in (executions.examples(framework, resolved) if part.every_execution_mode
                                       else [executions.DEFAULT])
                     for mode in _modes(part, framework, resolved)
                     for loading in part.module_loadings])


def _modes(part: Part, framework: str, resolved: str) -> list[str]:
    """The allocator modes a part runs a framework in: every mode, or the default (and, on a GPU, its pool off)."""
    if part.every_allocator_mode:
        return allocator_modes.examples(framework)
    pool_off = allocator_modes.without_pool(framework) if part.without_pool and resolved == "cuda" else None
    return ["default", *([pool_off] if pool_off else [])]


def _once(found: list[Scenario]) -> list[Scenario]:
    """Each scenario once, in first-named order: `--models` gives every part the same models, and two parts that
    differ only in their models then name the same scenario."""
    return list({identity(scenario.to_dict()): scenario for scenario in found}.values())


def technique_filter(parts: tuple[Part, ...]) -> tuple[str, ...]:
    """A user's choice among the suite's techniques (`bench --suite techniques --techniques none,checkpoint`): only
    the scenarios with one of them run; () for all. One the suite never runs is refused, naming those it runs."""
    chosen = _listed("FOOTPRINT_TECHNIQUES", (), list(techniques.TECHNIQUES), "technique")
    offered = {technique for part in parts for technique in part.techniques}
    if set(chosen) - offered:
        raise SpecError(f"--techniques: this suite runs {', '.join(sorted(offered))}, not "
                        f"{', '.join(sorted(set(chosen) - offered))}")
    return chosen


def search_bound(name: str) -> int | None:
    """A user's bound on each fit question's search (`bench --suite fit --max-batch 16`: fewer probes, an answer
    capped there where the question's own bound is higher); None: each question's own."""
    text = os.environ.get("FOOTPRINT_MAX_BATCH", "")
    if not text:
        return None
    if name != "fit":
        raise SpecError("--max-batch bounds the fit suite's searches; this suite asks no question")
    if not text.isdigit() or int(text) < 1:
        raise SpecError(f"--max-batch must be a positive integer, got {text!r}")
    return int(text)


def fit_questions() -> list[tuple[Question, Scenario]]:
    """Each question for each chosen framework (about the chosen models, where --models names some), as the scenario
    its bisection starts from, its search within `bench --max-batch` where that is given."""
    _, chosen_frameworks, chosen_models, resolved = suite_settings("fit")
    bound = search_bound("fit")
    return [(question if bound is None else replace(question, max_batch=min(bound, question.max_batch)),
             Scenario.create(framework, question.model, kind=question.kind, batch=1, device=resolved,
                                       optimizer=question.optimizer, technique=question.technique))
            for question in FIT_QUESTIONS if not chosen_models or question.model in chosen_models
            for framework in chosen_frameworks]


def size(name: str) -> str:
    """What a suite runs, in words: its scenarios, or for the fit suite its questions."""
    return f"{len(fit_questions())} fit questions" if name == "fit" else f"{len(scenarios(name))} scenarios"
