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


def _train(row: dict, framework: str) -> str:
    found = row["train"].get(framework)
    if not found:
        return "not run" if row["spec_counts"] is not None else "-"
    if found["status"] != "ok":
        return found["status"]
    return "no estimate" if found["estimate_error"] is None else f"{found['estimate_error']:+.1%}"


def _measured_at(train: dict) -> str:
    """Which commits measured the training records (a resumed run keeps those an earlier commit measured)."""
    found = sorted(train.get("records_by_commit", {}).items())
    return "; its records were measured at " + ", ".join(f"{commit[:7]} ({count})" for commit, count in found) \
        if found else ""


def markdown(data: dict) -> str:
    rows, check, train = data["rows"], data["check"], data["train"]
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
             "| source | net | input | counts | " + " | ".join(f"output {fw}" for fw in check["frameworks"])
             + " | rounding | " + " | ".join(f"estimate {fw}" for fw in train["frameworks"]) + " | why not |",
             "|---|---|---:|---|" + "---:|" * (len(check["frameworks"]) + 1 + len(train["frameworks"])) + "---|"]
    for row in rows:
        why = (row["reason"] or row["check_reason"] or "").replace("|", "\\|")
        lines.append(f"| {row['source']} | {row['name']} | {row['size']} | {_counts(row)} | "
                     + " | ".join(_check(row, fw, tolerance) for fw in check["frameworks"]) + f" | {_rounding(row)} | "
                     + " | ".join(_train(row, fw) for fw in train["frameworks"]) + f" | {why} |")
    return "\n".join(lines) + "\n"
