"""The end of a bench: one table per model and kind in MiB, the lowest marked, and a published run left alone."""

from __future__ import annotations

import os
import subprocess
import sys

from suites.report import summary
from suites.run.registry import ROOT
from suites.run.runfile import load


def test_one_table_per_model_and_kind_with_the_lowest_marked_and_pools_not_ranked() -> None:
    text = summary.tables(load(ROOT / "results" / "h100-ec3adfa" / "default-cuda.json"))
    tables = text.split("\n\n")
    assert [table.splitlines()[0] for table in tables[:5]] == [
        "keras200m train (batch 1)", "keras200m infer (batch 1)", "heatmap68 infer (batch 1)",
        "resnet50 train (batch 8)", "resnet50 infer (batch 8)"]
    heatmap = dict(line.split(None, 1) for line in tables[2].splitlines()[2:])
    assert heatmap["torch"].split() == ["648*", "11.9"]  # the least the card lost; MiB, as the report says it
    assert heatmap["jax"].split() == ["61,362p", "8.4*"]  # the pool is marked, not ranked; the least needed
    assert "GiB" not in text and text.endswith("probes (the estimate's constants, not listed): 16 of 16 ok")


def test_a_bench_in_the_repository_prints_the_summary_and_leaves_git_status_clean() -> None:
    def status() -> str:
        return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=ROOT,
                              capture_output=True, text=True, check=True).stdout

    before = status()
    env = {name: value for name, value in os.environ.items() if name != "FOOTPRINT_RESULTS"}
    done = subprocess.run([sys.executable, "-m", "suites", "bench", "--suite", "default", "--device", "cpu",
                           "--frameworks", "torch", "--models", "heatmap68", "--fresh"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    table = done.stdout.split("heatmap68 infer (batch 1)\n")[1].splitlines()
    # on the CPU: ranked by the anonymous memory; torch has no allocator figure there, so no needs column
    assert table[0].split() == ["framework", "anon", "MiB", "holds", "MiB"] and table[1].split()[0] == "torch"
    assert "footprint: wrote results/local/default-cpu.json" in done.stdout
    assert status() == before
