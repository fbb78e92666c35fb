"""The suites: which scenarios each one runs, narrowed by the FOOTPRINT_* variables `make bench` sets."""

from __future__ import annotations

import os
from dataclasses import dataclass

from models.catalogue import get_model
from models.scenario import SCENARIO_KINDS, Scenario
from models.spec import SpecError
from suites import device
from suites.registry import frameworks


@dataclass(frozen=True)
class Suite:
    models: tuple[str, ...]
    kinds: tuple[str, ...] = SCENARIO_KINDS
    optimizer: str = "adam"


SUITES = {
    "default": Suite(models=("keras200m", "keras-small", "heatmap68")),
}


def _listed(variable: str, default: tuple[str, ...], valid: list[str] | None, what: str) -> tuple[str, ...]:
    names = tuple(name for name in os.environ.get(variable, "").split(",") if name) or default
    for name in names:
        if valid is not None and name not in valid:
            raise SpecError(f"unknown {what} {name!r}; valid: {', '.join(valid)}")
    return names


def suite_settings(name: str) -> tuple[Suite, tuple[str, ...], tuple[str, ...], str]:
    """(suite, frameworks, models, device) after FOOTPRINT_FRAMEWORKS, _MODELS and _DEVICE."""
    if name not in SUITES:
        raise SpecError(f"unknown suite {name!r}; valid: {', '.join(SUITES)}")
    suite = SUITES[name]
    chosen_frameworks = _listed("FOOTPRINT_FRAMEWORKS", tuple(frameworks()), frameworks(), "framework")
    models = _listed("FOOTPRINT_MODELS", suite.models, None, "model")
    for model in models:
        get_model(model)  # raises with the valid names
    return suite, chosen_frameworks, models, device.resolve(os.environ.get("FOOTPRINT_DEVICE", "auto"))


def scenarios(name: str) -> list[Scenario]:
    suite, chosen_frameworks, models, resolved = suite_settings(name)
    return [Scenario.create(framework, model, kind=kind, optimizer=suite.optimizer, device=resolved)
            for model in models for kind in suite.kinds for framework in chosen_frameworks]
