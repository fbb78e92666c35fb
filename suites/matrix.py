"""The suites: which scenarios each one runs, narrowed by the FOOTPRINT_* variables `make bench` sets.

A suite is `suites/bench_<name>.py` plus its entry here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from models import allocators
from models.catalogue import get_model
from models.scenario import SCENARIO_KINDS, Scenario
from models.spec import SpecError
from suites import device
from suites.constants import PROBE
from suites.registry import frameworks


@dataclass(frozen=True)
class Part:
    """One cross product of a suite: models x kinds x frameworks (x allocator modes) x module loadings."""

    models: tuple[str, ...]
    kinds: tuple[str, ...] = SCENARIO_KINDS
    every_allocator_mode: bool = False
    module_loadings: tuple[str, ...] = ("LAZY",)
    optimizer: str = "adam"


SUITES: dict[str, tuple[Part, ...]] = {
    "default": (Part(models=("keras200m", "keras-small", "heatmap68")),),
    "allocators": (
        Part(models=("keras200m", "heatmap68"), kinds=("train",), every_allocator_mode=True),
        # the context alone, with CUDA's lazy and eager module loading
        Part(models=("heatmap68",), kinds=("infer",), module_loadings=("LAZY", "EAGER")),
    ),
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
        get_model(model)  # raises with the valid names
    return SUITES[name], chosen_frameworks, models, device.resolve(os.environ.get("FOOTPRINT_DEVICE", "auto"))


def scenarios(name: str) -> list[Scenario]:
    """The probe of each framework first (its constants feed the estimates of the rest), then the suite."""
    parts, chosen_frameworks, models, resolved = suite_settings(name)
    probes = [Scenario.create(framework, PROBE, kind=kind, device=resolved)
              for kind in SCENARIO_KINDS for framework in chosen_frameworks]
    return probes + [Scenario.create(framework, model, kind=kind, optimizer=part.optimizer, device=resolved,
                            allocator=mode, cuda_module_loading=loading)
            for part in parts for model in (models or part.models) for kind in part.kinds
            for framework in chosen_frameworks
            for mode in (allocators.examples(framework) if part.every_allocator_mode else ["default"])
            for loading in part.module_loadings]
