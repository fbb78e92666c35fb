"""The fit suite: stories 1 and 3's "does it fit on my card?", per framework, by bisection."""

from __future__ import annotations

import os

import pytest

from models.scenario import Scenario
from suites.analysis import fit
from suites.bench.matrix import Question, fit_questions
from suites.run.orchestrator import DEFAULT_TIMEOUT_S, run_scenario
from suites.run.runfile import fit_identity

QUESTIONS = fit_questions()


def _id(question: Question, scenario: Scenario) -> str:
    return "-".join([scenario.framework, scenario.model, scenario.kind, question.budget, question.optimizer,
                     question.technique])


REQUESTED = {fit_identity(scenario, fit.parse_budget(question.budget), question.max_batch):
             scenario.to_dict() | {"fit_budget_bytes": fit.parse_budget(question.budget)}
             for question, scenario in QUESTIONS}


@pytest.mark.parametrize(("question", "scenario"), QUESTIONS, ids=[_id(*pair) for pair in QUESTIONS])
def test_fit(benchmark, question: Question, scenario: Scenario, record_property, run_files) -> None:  # noqa: ANN001
    run = run_files("fit", scenario.device)  # before the first question: a stop during it still writes the file
    run.request(REQUESTED)
    budget = fit.parse_budget(question.budget)
    key = fit_identity(scenario, budget, question.max_batch)
    if os.environ.get("FOOTPRINT_RESUME") and run.has_fit(key):
        pytest.skip("already answered in the run file (--resume)")
    benchmark.group = f"fit: {question.story}"
    timeout = float(os.environ.get("FOOTPRINT_TIMEOUT", DEFAULT_TIMEOUT_S))
    result = benchmark.pedantic(fit.find, args=(scenario, budget, lambda probe: run_scenario(probe, timeout=timeout),
                                                question.max_batch), rounds=1, iterations=1)
    result |= {"question": question.story, "question_identity": key}
    run.add_fit(result)
    record_property("footprint", fit.describe(result).splitlines()[0])
    if result["answer"] == "unknown":  # a failure that is not memory needs a look, like an errored scenario
        pytest.fail(fit.describe(result).splitlines()[0], pytrace=False)
