"""The pages a newcomer reads first agree with the code and with the run files they cite (issue 33)."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys

import pytest

from models.scenario import SCENARIO_KINDS
from suites.__main__ import parser
from suites.analysis.across_records import savings
from suites.analysis.constants import PROBES
from suites.bench import matrix
from suites.report import stories, timing
from suites.run.registry import ROOT
from suites.run.runfile import load

README = (ROOT / "README.md").read_text()
USAGE = (ROOT / "docs" / "usage.md").read_text()
MIB = 2**20


def _commands() -> dict[str, argparse.ArgumentParser]:
    """Every subcommand as the command line builds it today, so flags added later are checked too."""
    return next(action for action in parser()._actions if isinstance(action, argparse._SubParsersAction)).choices


def test_the_top_level_help_lists_every_command(monkeypatch: pytest.MonkeyPatch) -> None:
    """`--help` once named five of the ten commands in its description; now the list is argparse's, one line each
    in an 80-column terminal."""
    monkeypatch.setenv("COLUMNS", "80")
    text = parser().format_help()
    for name in _commands():  # its line, not followed by a continuation: one line each
        assert re.search(rf"^    {name} .*\n(?! {{24}})", text, re.MULTILINE), name
    assert not re.search(r"suites \w+\|", text), "a hand-kept list of commands in the description"


@pytest.mark.parametrize("name", list(_commands()))
def test_usage_documents_every_command_and_flag(name: str) -> None:
    assert f"python -m suites {name}" in USAGE, f"docs/usage.md never shows `python -m suites {name}`"
    for action in _commands()[name]._actions:
        for flag in action.option_strings:
            if flag.startswith("--") and flag != "--help":
                assert re.search(re.escape(flag) + r"(?![\w-])", USAGE), f"docs/usage.md never mentions {name} {flag}"


def _suite_models(name: str) -> str:
    """A suite's models, each with the kinds it runs them in, in the order the suite lists them."""
    kinds: dict[str, set[str]] = {}
    for part in matrix.SUITES[name]:
        for model in part.models:
            kinds.setdefault(model, set()).update(part.kinds)
    for question in matrix.FIT_QUESTIONS if name == "fit" else ():
        kinds.setdefault(question.model, set()).add(question.kind)
    return ", ".join(f"{model} ({', '.join(kind for kind in SCENARIO_KINDS if kind in found)})"
                     for model, found in kinds.items())


@pytest.mark.parametrize("name", list(matrix.SUITES))
def test_usage_lists_what_each_suite_runs(name: str) -> None:
    """The default suite's resnet50 was missing from the page for a while."""
    assert f"| `{name}` | {_suite_models(name)} |" in USAGE


def test_the_pytest_example_selects_what_it_says() -> None:
    """`pytest suites -k "torch and keras200m"` selected 24 scenarios of every suite (keras-torch's too)."""
    example = re.search(r"^pytest (\S+) -k \"([^\"]+)\" +# .*: torch keras200m train, infer$", USAGE, re.MULTILINE)
    assert example, "the pytest example in docs/usage.md"
    listed = subprocess.run([sys.executable, "-m", "pytest", example[1], "--collect-only", "-q", "-k", example[2]],
                            cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert sorted(re.findall(r"::test_scenario\[(.+)\]", listed)) == ["torch-keras200m-infer", "torch-keras200m-train"]


def test_models_narrows_as_the_pages_say(monkeypatch: pytest.MonkeyPatch) -> None:
    """`MODELS=heatmap68` replaces each part's models and keeps its kinds: heatmap68 is trained too."""
    monkeypatch.setenv("FOOTPRINT_MODELS", "heatmap68")
    monkeypatch.setenv("FOOTPRINT_FRAMEWORKS", "torch")
    monkeypatch.setenv("FOOTPRINT_DEVICE", "cpu")
    ran = [scenario.kind for scenario in matrix.scenarios("default") if scenario.spec.name not in PROBES]
    kinds = " and ".join(kind for kind in SCENARIO_KINDS if kind in ran)
    assert kinds == "train and infer" and len(ran) == 2
    assert f"`MODELS=heatmap68` on the default suite runs heatmap68 {kinds}" in " ".join(USAGE.split())
    assert f"MODELS=heatmap68 DEVICE=cpu` (heatmap68 {kinds}:" in " ".join(README.split())


def test_findings_quote_the_cpu_techniques_run() -> None:
    """findings.md said torch's fp16 cost 201 MiB more where the run it cites has it saving 30.9."""
    findings = (ROOT / "docs" / "findings.md").read_text()
    bullet = findings[findings.index("- Each technique on plain-16 at batch 16"):]
    bullet = " ".join(bullet[:bullet.index("\n- ")].split())
    saved = {(found.framework, found.technique): found for found in savings(load(ROOT / "results" / "cpu-4bbc599" /
                                                                                 "techniques-cpu.json"))
             if found.model == "plain-16" and found.unavailable is None}

    def mib(framework: str, technique: str) -> str:
        return f"{saved[framework, technique].measured / MIB:.1f}"

    assert f"fp16 saved {mib('torch', 'fp16')} MiB in torch" in bullet
    assert f"and {mib('keras-torch', 'fp16')} in Keras on torch" in bullet
    assert f"held {-saved['jax', 'fp16'].measured / MIB:.1f} MiB more in JAX" in bullet
    assert f"torch {saved['torch', 'fp16'].time_ratio:.1f}x the baseline's step time" in bullet
    assert (f"accumulation over 4 micro-batches saved {mib('keras-tensorflow', 'accumulate')} MiB in TensorFlow"
            in bullet)
    assert f"bf16 saved {mib('keras-tensorflow', 'bf16')} (TensorFlow" in bullet
    assert f"checkpointing saved {mib('keras-tensorflow', 'checkpoint')} (TensorFlow" in bullet


def _minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def test_the_quoted_versions_are_the_runs() -> None:
    """The README said PyTorch 2.13 and JAX 0.10 (the CPU run's) beside an H100 headline measured with 2.11 and 0.11."""
    gpu, cpu = (load(ROOT / "results" / name) for name in (stories.RUNS["gpu_default"], stories.RUNS["cpu_default"]))

    def versions(run: dict, framework: str) -> set[str]:
        return {record["framework"]["versions"][framework] for record in run["records"]
                if record["scenario"]["framework"] == framework}

    (torch_gpu,), (jax_gpu,) = versions(gpu, "torch"), versions(gpu, "jax")
    (keras_gpu,) = {record["framework"]["versions"]["keras"] for record in gpu["records"]
                    if "keras" in record["framework"]["versions"]}
    (torch_cpu,), (jax_cpu,) = versions(cpu, "torch"), versions(cpu, "jax")
    assert f"torch {torch_gpu}, jax {jax_gpu}, Keras {keras_gpu} on JAX and on torch" in README
    frameworks = (ROOT / "docs" / "frameworks.md").read_text()  # the framework table, which README and usage link
    assert f"PyTorch ({_minor(torch_gpu)} on the H100, {_minor(torch_cpu)} on the CPU)" in frameworks
    assert f"JAX ({_minor(jax_gpu)} on the H100, {_minor(jax_cpu)} on the CPU)" in frameworks


def test_the_framework_table_lives_once() -> None:
    """The README and docs/usage.md each had a table of the frameworks, and they had drifted apart."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    holding = [page.relative_to(ROOT).as_posix() for page in pages if "| framework | what runs |" in page.read_text()]
    assert holding == ["docs/frameworks.md"]
    assert "](docs/frameworks.md#the-five-frameworks)" in README
    assert "](frameworks.md#the-five-frameworks)" in USAGE


DURATION = re.compile(r"\d[\d.,]* (?:to [\d.,]+ )?(?:minutes|min)\b|\b\d+ (?:and \d+ )?s\b")


def test_make_tests_time_is_stated_once() -> None:
    """Three pages gave three times (11 to 13, 11 to 12, 10 to 13 minutes); the README states it, the others link."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    stating = [page.relative_to(ROOT).as_posix() for page in pages for paragraph in page.read_text().split("\n\n")
               if "make test" in paragraph and DURATION.search(paragraph)]
    assert stating == ["README.md"]
    assert "[README](../README.md#the-two-commands)" in USAGE


def test_the_time_table_s_gpu_column_is_the_newest_gpu_run_s() -> None:
    """The table gave d2f1409's times after two newer GPU runs; its GPU column is now read from the newest one."""
    header, cells = timing.column(timing.newest_gpu_run(), matrix.SUITES)
    section = USAGE[USAGE.index("### How long each suite takes"):USAGE.index("### What each suite runs")]
    assert f"| suite | CPU, 2 cores | {header} |" in section
    for suite, cell in cells.items():
        assert re.search(rf"^\| `{suite}` \|.*\| {re.escape(cell)} \|$", section, re.MULTILINE), (suite, cell)
