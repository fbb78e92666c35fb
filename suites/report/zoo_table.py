"""The zoo's conformance table as Markdown (results/zoo-<commit>/zoo.md), from its zoo.json."""

from __future__ import annotations


def _counts(row: dict) -> str:
    source, spec = row["source_counts"], row["spec_counts"]
    if source is None:
        return "-"
    if spec is None:
        return f"{source[0]:,} + {source[1]:,}"
    same = tuple(spec) == tuple(source)
    return f"{spec[0]:,} + {spec[1]:,} {'equal' if same else f'DIFFER (source: {source[0]:,} + {source[1]:,})'}"


def _check(row: dict, framework: str, tolerance: float) -> str:
    if row["check_reason"]:
        return "not compared"
    value = row["check"].get(framework)
    return "-" if value is None else f"{value:.1e}" if value <= tolerance else f"DIFFERS {value:.1e}"


def _rounding(row: dict) -> str:
    return "-" if row.get("rounding") is None else f"{row['rounding']:.1e}"


def _train(row: dict, framework: str, key: str = "train") -> str:
    """The estimate's error on train step 2 and, after the slash, on inference (an older table: the step's only);
    `key`: "train_large" for the net trained at the larger size, where it was."""
    found = row.get(key, {}).get(framework)
    if not found:
        return "not run" if row["spec_counts"] is not None and key == "train" else "-"
    if found["status"] != "ok":
        return found["status"]
    shown = [found[error] for error in ("estimate_error", "inference_error") if error in found]
    return " / ".join("-" if error is None else f"{error:+.1%}" for error in shown)


def _evaluation(evaluation: dict | None) -> list[str]:
    """The head: the field's figures per framework, half of the split and input size, the held-out half first."""
    if not evaluation or not evaluation["frameworks"]:
        return []
    phases = " and ".join(evaluation["phases"])
    lines = [f"The estimate on nets it was not tuned on (the split: `{evaluation['split']}`; held out: "
             f"{len(evaluation['halves']['held-out'])} nets, tuned: {len(evaluation['halves']['tuned'])}), on the "
             f"{evaluation['device']}, {phases}, {evaluation['view']} view: the absolute relative error's median, 90th "
             f"percentile and worst; unsafe: {evaluation['unsafe']}; the margin: the "
             f"{evaluation['quantile']:.0%} quantile of the held-out half's shortfalls, which `estimate --budget` "
             f"adds.", "",
             "| framework | half | input | nets | phases | median | p90 | worst | unsafe | margin at this size "
             "| margin | unsafe with the margin |", "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    large = evaluation.get("large") or {"frameworks": {}}
    for framework, halves in evaluation["frameworks"].items():
        margin = (halves.get("held-out") or {}).get("margin")
        groups = [("zoo's", half, figures) for half, figures in halves.items()] + [
            (f"{large['size']} px", half, figures) for half, figures in large["frameworks"].get(framework, {}).items()]
        for size, half, figures in groups:
            with_margin, at_size = figures["unsafe_with_margin"], figures.get("margin_at_size")
            lines.append(f"| {framework} | {half} | {size} | {figures['nets']} | {figures['n']} | "
                         f"{figures['median']:.1%} | {figures['p90']:.1%} | {figures['max']:+.1%} ({figures['worst']}) "
                         f"| {figures['unsafe']:.0%} | {'-' if at_size is None else f'+{at_size:.0%}'} | "
                         f"{'-' if margin is None else f'+{margin:.0%}'} | "
                         f"{'-' if with_margin is None else f'{with_margin:.0%}'} |")
    return [*lines, ""]


def _measured_at(train: dict) -> str:
    """Which commits measured the training records (a resumed run keeps those an earlier commit measured)."""
    found = sorted(train.get("records_by_commit", {}).items())
    return "; its records were measured at " + ", ".join(f"{commit[:7]} ({count})" for commit, count in found) \
        if found else ""


def markdown(data: dict) -> str:
    rows, check, train = data["rows"], data["check"], data["train"]
    large = train.get("large") or {"frameworks": []}  # the nets trained again at the size users train
    imported = [row for row in rows if row["spec_counts"] is not None]
    equal = [row for row in imported if tuple(row["spec_counts"]) == tuple(row["source_counts"])]
    agree = [row for row in imported if row["check"] and all(value <= check["tolerance"]
                                                             for value in row["check"].values())]
    tolerance = check["tolerance"]
    differ = [row for row in imported if row["check"] and row not in agree]
    rounded = [row for row in differ if (row.get("rounding") or 0) > tolerance]
    lines = [f"# The zoo: public conv nets through the suite ({data['git_commit'][:12]})", "",
             f"{len(imported)} of {len(rows)} nets import; {len(equal)} with the source's exact counts; "
             f"{len(agree)} compute the source's outputs within {tolerance:.0e} in "
             f"{' and '.join(check['frameworks'])}; {len(differ)} differ, {len(rounded)} of them where float32's "
             f"rounding alone moves the source's own answer past {tolerance:.0e}. Written by `python -m suites zoo` "
             f"on {data['machine']['cpus']} CPUs, {data['written_at']}.", "",
             "Counts: the imported spec's parameters + statistics, and whether they equal the source's (Keras's "
             "trainable + non-trainable, torch's parameters + floating-point buffers). Output: " + check["difference"]
             + ", with the file's weights (`models --check`). Rounding: " + check.get("rounding", "not measured")
             + ". Estimate: " + train["error"]
             + f", batch {train['batch']} on the {train['device']}{_measured_at(train)}.", "",
             *_saved_summary(data),
             *_evaluation(data.get("evaluation")),
             "| source | net | half | input | counts | " + " | ".join(f"output {fw}" for fw in check["frameworks"])
             + " | rounding | " + " | ".join(f"estimate {fw}" for fw in train["frameworks"])
             + "".join(f" | estimate {fw} at {large['size']} px" for fw in large["frameworks"])
             + " | saved for backward | why not |",
             "|---|---|---|---:|---|" + "---:|" * (len(check["frameworks"]) + 1 + len(train["frameworks"])
                                                   + len(large["frameworks"])) + "---|---|"]
    for row in rows:
        why = (row["reason"] or row["check_reason"] or "").replace("|", "\\|")
        lines.append(f"| {row['source']} | {row['name']} | {row.get('half', '-')} | {row['size']} | {_counts(row)} | "
                     + " | ".join(_check(row, fw, tolerance) for fw in check["frameworks"]) + f" | {_rounding(row)} | "
                     + " | ".join(_train(row, fw) for fw in train["frameworks"])
                     + "".join(f" | {_train(row, fw, 'train_large')}" for fw in large["frameworks"])
                     + f" | {_saved(row)} | {why} |")
    return "\n".join(lines) + "\n"


def _saved(row: dict) -> str:
    """The module's own saved bytes and each rebuild's note; "-" for a net whose source is no torch module."""
    saved = row.get("saved") or {}
    if "module" not in saved:
        return "-"
    return f"module {saved['module'] / 1e6:,.1f} MB: {saved.get('note', 'rebuilds not measured')}"


def _saved_summary(data: dict) -> list[str]:
    """How many torch modules' rebuilds keep the module's own saved bytes, per framework (none before this table had
    the column)."""
    saved = data.get("saved")
    measured = [row["saved"] for row in data["rows"] if "note" in (row.get("saved") or {})]
    if not saved or not measured:
        return []
    counts = []
    for framework in saved["frameworks"]:
        equal = sum(f"{framework} equal" in row["note"].split("; ") for row in measured)
        explained = sum(any(part.startswith(f"{framework} ") and "what its rules keep" in part
                            for part in row["note"].split("; ")) for row in measured)
        counts.append(f"in {framework} {equal} keep the module's bytes exactly and {explained} keep more by what "
                      f"{framework}'s rules keep beyond torch's (within {saved['explained']:.0%})")
    return [f"Saved for backward: {saved['what']}, batch {saved['batch']}. Of {len(measured)} torch modules, "
            + "; ".join(counts) + ".", ""]
