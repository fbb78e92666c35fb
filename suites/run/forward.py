"""The workers' forward job over many nets: each net's canonical arrays run forward in every framework, all nets
in one worker per framework, so a framework's import and its first compilations are paid once."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from models.protocol import write_scenario
from models.scenario import Scenario
from models.spec import ModelSpec

Net = tuple[ModelSpec, dict[str, np.ndarray]]  # a spec and its arrays: `inputs`, `targets`, `layer{index}_{name}`


Outputs = dict[str, dict[str, np.ndarray]]  # per framework, the arrays its forward job saved


def forward_all(nets: Sequence[Net], folder: Path, frameworks: Sequence[str], run: Callable[[str, list[str]], None],
                training: bool = False) -> list[Outputs]:
    """Per net, per framework, what its forward job saved (output, loss, running statistics); `run(framework,
    arguments)` starts the framework's worker on the job's arguments, the caller deciding what a failure is."""
    jobs: dict[str, list[str]] = {framework: [] for framework in frameworks}
    for index, (spec, arrays) in enumerate(nets):
        net_folder = folder / f"net{index}"
        net_folder.mkdir(parents=True, exist_ok=True)
        np.savez(net_folder / "arrays.npz", **arrays)
        for framework in frameworks:
            scenario = Scenario(framework=framework, model=spec.name, batch=len(arrays["inputs"]),
                                spec_json=spec.to_dict())
            scenario_folder = net_folder / framework
            scenario_folder.mkdir(exist_ok=True)
            jobs[framework] += [write_scenario(scenario.to_dict(), scenario_folder), str(net_folder / "arrays.npz"),
                                str(net_folder / f"{framework}.npz")]
    for framework, arguments in jobs.items():
        if arguments:
            run(framework, ["forward", *arguments, *(["--training"] if training else [])])
    return [{framework: dict(np.load(folder / f"net{index}" / f"{framework}.npz")) for framework in frameworks}
            for index in range(len(nets))]
