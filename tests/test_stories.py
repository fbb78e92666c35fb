"""docs/stories.md is what `python -m suites stories` makes of the published run files: the page cannot drift."""

from __future__ import annotations

from pathlib import Path

import pytest

from suites.__main__ import main
from suites.analysis import errors
from suites.report import stories, summary
from suites.run.registry import ROOT
from suites.run.runfile import load


@pytest.fixture(scope="module")
def page() -> str:
    """The page as the code makes it today (tens of seconds: every published run is accounted)."""
    return stories.markdown()


def test_the_committed_page_matches_the_published_runs(page: str) -> None:
    assert stories.PAGE.read_text() == page, "run `python -m suites stories` and commit docs/stories.md"


def test_check_exits_1_naming_the_page_when_it_drifts(page: str, tmp_path: Path, monkeypatch, capsys) -> None:  # noqa: ANN001
    monkeypatch.setattr(stories, "markdown", lambda: page)
    monkeypatch.setattr(stories, "PAGE", tmp_path / "stories.md")
    monkeypatch.setattr(stories, "ROOT", tmp_path)
    stories.PAGE.write_text(page)
    assert main(["stories", "--check"]) == 0
    stories.PAGE.write_text(page.replace("| torch |", "| torch (edited) |", 1))
    assert main(["stories", "--check"]) == 1
    assert "stories.md differs from the published runs" in capsys.readouterr().err


def test_every_answer_reads_a_committed_run_file(page: str) -> None:
    for name in stories.RUNS.values():
        assert (ROOT / "results" / name).exists() and f"results/{name}" in page
    assert page.count("\n## ") == 4


def test_the_readme_front_page_quotes_the_published_gpu_run_as_the_code_reads_it() -> None:
    """The README's headline table and the run's detail in docs/findings.md (its tables and error rows) are today's
    readings of the H100 run, not hand-kept figures; every published folder is linked from findings.md, which the
    README links; the README stays a front page."""
    readme = (ROOT / "README.md").read_text()
    findings = (ROOT / "docs" / "findings.md").read_text()
    run = load(ROOT / "results" / stories.GPU / "default-cuda.json")
    blocks = {block.splitlines()[0]: block for block in summary.tables(run).split("\n\n")}
    assert blocks["keras200m train (batch 1)"] in readme
    for title in ("keras200m train (batch 1)", "heatmap68 infer (batch 1)", "resnet50 train (batch 8)"):
        assert blocks[title] in findings, title
    found = errors.of_run(run)
    rows = [f"| {framework}, {view} | {figures['median'] * 100:.1f} % | {figures['worst'].error * 100:+.1f} % "
            f"({figures['worst'].model} {figures['worst'].phase}) |"
            for (framework, view, estimate), figures in found.items() if estimate == "footprint"]
    table = findings[findings.index("| framework, view | median error | worst |"):].split("\n\n")[0].splitlines()[2:]
    assert sorted(table) == sorted(rows), "every footprint row `python -m suites errors` prints for the run, no other"
    for folder in sorted(path.name for path in (ROOT / "results").iterdir() if path.is_dir() and path.name != "local"):
        assert f"](../results/{folder}/)" in findings, folder
    assert "](docs/findings.md#the-published-runs)" in readme
    assert len(readme.splitlines()) <= 110
