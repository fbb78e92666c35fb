"""Command line: `python -m suites COMMAND ...`, each command below with what it does (`python -m suites COMMAND
--help`: its flags; docs/usage.md: all of them).

Bad input is one line on stderr naming the valid choices, exit status 2, and nothing written.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import NoReturn

from models import executions
from models.allocator_modes import CUDA_MODULE_LOADING, mode_names
from models.catalogue import is_model_file, listed_models, load_model, sized_name
from models.estimate import Estimate, estimate, floor
from models.importers.files import load_spec_file
from models.layer_kinds import PROBED
from models.record import atomic_write_json
from models.scenario import DEVICES, DTYPES, OPTIMIZERS, PHASES, SCENARIO_KINDS, Scenario
from models.spec import MAX_SIZE, SpecError
from models.techniques import ACCUMULATION_STEPS, TECHNIQUES, unavailable
from suites.report import readout
from suites.run import device, executors, import_check, interrupts, runfile
from suites.run.pieces import DEFAULT_LIMIT_S
from suites.run.registry import SetupError, check_overrides, frameworks, interpreter

USAGE_ERROR = 2
MODEL_FILE = "a model file: a JSON spec, a .keras file, model.to_json()'s JSON or a .onnx file (docs/models.md)"
MAX_BATCH = MAX_SIZE  # the largest batch any command takes: the spec's largest size (see _batch)
SIZE = ("H[xW]: a model file's image input rebuilt at this height and width (a fully convolutional net at another "
        "size; refused where the net fixes its size)")


class OneLineParser(argparse.ArgumentParser):
    """argparse, but an error is one line (its own message already lists the valid choices)."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE_ERROR, f"{self.prog}: error: {message}\n")


def _framework_list(text: str) -> list[str]:
    """Frameworks by name, each one the suite has."""
    names = [name for name in text.split(",") if name]
    unknown = [name for name in names if name not in frameworks()]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown framework {', '.join(unknown) or '(none)'}; the suite has "
                                         f"{', '.join(frameworks())}")
    return names


def _seconds(text: str) -> float:
    """A timeout: a positive, finite number of seconds (zero or less would kill every worker at once)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return value


def _batch(text: str) -> int:
    """A batch: a positive whole number up to MAX_BATCH, the same rule for every command (omitted: the model's own).
    Beyond it no framework could index the batch axis, and the estimate's byte counts would overflow a float."""
    try:
        value = int(text)
    except ValueError:  # not a whole number, or one of more digits than Python converts (then far too large)
        value = MAX_BATCH + 1 if text.strip().isdigit() else 0
    shown = repr(text) if len(text) <= 40 else f"{text[:20]!r}... ({len(text):,} characters)"
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer (omit --batch for the model's own), got {shown}")
    if value > MAX_BATCH:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_BATCH:,} (2**31 - 1, the largest 32-bit index: what "
                                         f"JAX and many GPU kernels index with), got {shown}")
    return value


def _size(text: str) -> tuple[int, int]:
    """--size: H or HxW, each a positive whole number."""
    found = re.fullmatch(r"([0-9]{1,9})(?:x([0-9]{1,9}))?", text.strip())
    if not found or not int(found[1]) or (found[2] is not None and not int(found[2])):
        raise argparse.ArgumentTypeError(f"must be a height, or heightxwidth, in pixels (e.g. 512 or 512x768), got "
                                         f"{text[:40]!r}")
    return int(found[1]), int(found[2] or found[1])


def _run(args: argparse.Namespace) -> int:
    from suites.run.orchestrator import run_scenario

    scenario = Scenario.create(args.framework, args.model, args.model_file, kind=args.scenario,
                               batch=args.batch, optimizer=args.optimizer, device=args.device,
                               allocator=args.allocator, cuda_module_loading=args.cuda_module_loading,
                               technique=args.technique, execution=args.execution)
    interpreter(scenario.framework, device.resolve(scenario.device))  # no GPU, no environment: before --out is made
    _possible(scenario)
    if args.out:  # before measuring, not after: writable, not a run file, and not one a bench is writing
        _prepare_out(Path(args.out), runfile.lock)
    record = run_scenario(scenario, timeout=args.timeout)
    saved = bool(args.out) and _saved(args.out, record)
    if args.json or (args.out and not saved):
        print(json.dumps(record, indent=1))
    else:
        from suites.analysis import accounting

        print(readout.phase_table(accounting.reaccount({"records": [record]})[0]))
    return 0 if record["status"] == "ok" else 1


def _possible(scenario: Scenario) -> None:
    """Refuses a scenario whose physical floor (what no framework can avoid) exceeds the device's whole memory: it
    cannot run, so it is bad input, not an out-of-memory to wait for."""
    resolved = device.resolve(scenario.device)
    total = device.capacity(resolved)
    least = floor(scenario.spec, scenario.kind, scenario.batch, scenario.optimizer, DTYPES[scenario.dtype],
                  scenario.technique)
    if total and least > total:
        raise SpecError(f"batch {scenario.batch}: its physical floor is {least / 2**30:,.1f} GiB, more than the "
                        f"{resolved}'s {total / 2**30:,.1f} GiB")


def _prepare_out(path: Path, check: Callable[[Path], None]) -> None:
    """--out, before measuring: not a run file, then `check` (writable; `run` also locks it), which makes the
    folders it lacks: said in one line, so a mistyped path is seen."""
    made = not path.parent.exists()
    runfile.refuse_run_file(path)
    check(path)
    if made:
        print(f"python -m suites: made folder {path.parent} for --out", file=sys.stderr)


def _saved(path: str, data: dict) -> bool:
    """Writes `data` to `path`, or says in one line why not (a disk that filled while measuring)."""
    try:
        atomic_write_json(path, data)
        return True
    except OSError as error:
        print(f"python -m suites: error: cannot write {path}: {error.strerror or error}; printed instead",
              file=sys.stderr)
        return False


def _models(args: argparse.Namespace) -> int:
    """The catalogue, or with --model-file the files given, each with its counts (a file's in the spec it imports
    to, so what the suite would build)."""
    if args.check:
        if not args.model_file:
            raise SpecError("--check proves a model file's import: give --model-file")
        ready, refused = import_check.prepare(args.model_file)
        for reason in refused.values():  # each file's one line, before the workers' minutes
            print(f"python -m suites: error: {reason}", file=sys.stderr, flush=True)
        proofs = import_check.prove(ready, args.frameworks)
        print(import_check.report(proofs, list(refused)))
        return USAGE_ERROR if refused else 0 if all(proof.holds for proof in proofs.values()) else 1
    specs = [load_spec_file(path) for path in args.model_file] if args.model_file else listed_models()
    width = max(12, *(len(spec.name) for spec in specs))
    print(f"{'model':<{width}} {'trainable':>13} {'statistics':>11} {'fp32 weights':>14}  layers  input -> output  "
          f"loss")
    for spec in specs:
        ends = ", ".join("x".join(map(str, shape)) for shape in spec.output_shapes)
        shapes = f"{'x'.join(map(str, spec.input_shape))} -> {ends}"
        weights = (spec.weight_bytes() + spec.statistics_bytes()) / 1e6
        print(f"{spec.name:<{width}} {spec.param_count:>13,} {spec.statistics_count:>11,} {weights:>11.1f} MB  "
              f"{len(spec.layers):>6}  {shapes}  {spec.loss}")
    if not args.model_file:
        print("plain-N: the plain family for any depth N (plain-8 shown)")
        print(f"probe-kind-K[-sameN]: the kind probes, K one of {', '.join(PROBED)} (the kinds suite runs 17)")
    return 0


def _estimate(args: argparse.Namespace) -> int:
    from suites.analysis import constants, explain, fit, margins
    from suites.run import nvml

    budget = None if args.budget is None else fit.parse_budget(args.budget)
    if budget is not None and args.batch:
        raise SpecError("--budget finds the batch: give no --batch")
    spec = load_model(args.model_file or args.model)
    resolved = device.resolve(args.device)
    reason = unavailable(args.framework or "any", args.technique, args.scenario, resolved, spec)
    if reason:
        raise SpecError(f"technique {args.technique}: {reason}")
    if args.technique == "accumulate" and budget is None and (args.batch or spec.default_batch) % ACCUMULATION_STEPS:
        raise SpecError(f"accumulate splits the batch into {ACCUMULATION_STEPS} micro-batches: give a batch it divides")
    source = Path(args.constants) if args.constants else constants.path(resolved)
    measured = constants.load(resolved, source)
    if args.constants and measured is None:
        raise SpecError(f"{args.constants}: neither a constants file nor a run file with a finished probe")
    if measured and measured.get("device") not in (None, resolved):
        raise SpecError(f"{args.constants}: its constants were measured on {measured['device']}, not {resolved}")
    if args.gpu_memory and resolved != "cuda":
        raise SpecError(f"--gpu-memory sizes a GPU's default pool: give --device cuda, not {resolved}")
    gpu, memory = None, args.gpu_memory
    if resolved == "cuda" and measured:
        gpu = args.gpu or nvml.visible_gpu_name()
        mismatch = constants.other_card(measured, gpu)
        if mismatch:
            print("\n".join(explain.wrap(f"python -m suites estimate: warning: {mismatch}")), file=sys.stderr)
        if memory is None and gpu and not args.gpu:  # the card here: its memory as NVML counts it
            memory = device.capacity(resolved)
    def at(framework: str | None, known: dict | None, batch: int, pool_grows: bool = False) -> Estimate:
        return estimate(spec, args.scenario, batch, args.optimizer, args.dtype, framework, resolved, args.technique,
                        (known or {}).get("blas_workspace", 0), pool_grows)

    known = constants.lookup(measured, args.framework, args.scenario) if args.framework else None
    analytic = at(args.framework, known, args.batch or 0)
    shown = (str(source.resolve().relative_to(constants.ROOT)) if source.resolve().is_relative_to(constants.ROOT)
             else str(source))
    # the published zoo's margins were measured with the published constants: other constants have none
    other = shown if source.resolve() != constants.path(resolved).resolve() else None
    zoo = None if other else margins.published_zoo()
    if budget is not None:
        unit = ACCUMULATION_STEPS if args.technique == "accumulate" else 1
        answers: list[explain.BatchAnswer | tuple[str, str]] = []
        for name in [args.framework] if args.framework else frameworks():
            found = constants.lookup(measured, name, args.scenario)
            why = unavailable(name, args.technique, args.scenario, resolved, spec)
            answers.append((name, why) if why else
                           explain.batch_answer(name, found, partial(at, name, found), budget, MAX_BATCH, unit,
                                                margins.margin(name, resolved, zoo)))
        print(explain.budget_table(analytic, answers, budget, MAX_BATCH, other))
    else:
        # a pool mapped when the device starts: what the process holds with it off, its allocator growing
        without_pool = at(args.framework, known, args.batch or 0, True) if known and "pool" in known else None
        margin = margins.margin(args.framework, resolved, zoo) if args.framework else None
        print(explain.layer_table(spec, analytic) if args.layers
              else explain.render(analytic, known, shown, gpu, memory, args.explain, without_pool, margin, other))
    return 0


def _card_memory(text: str) -> int:
    """--gpu-memory: a size with a unit, written as fit's budget is (24GiB, 80GB)."""
    from suites.analysis import fit

    try:
        return fit.parse_budget(text)
    except SpecError:
        raise argparse.ArgumentTypeError(f"must be {fit.SIZE_RULE}, e.g. 24GiB or 80GB, got {text!r}") from None


def _fit(args: argparse.Namespace) -> int:
    from suites.analysis import explain, fit, margins
    from suites.run.orchestrator import run_scenario

    budget = fit.parse_budget(args.budget)
    first = ACCUMULATION_STEPS if args.technique == "accumulate" else 1
    scenario = Scenario.create(args.framework, args.model, args.model_file, kind=args.scenario, batch=first,
                               optimizer=args.optimizer, device=device.resolve(args.device), technique=args.technique)
    interpreter(scenario.framework, scenario.device)  # no GPU, no environment: one line before the first probe
    if scenario.unavailable:
        raise SpecError(f"technique {args.technique}: {scenario.unavailable}")
    if args.max_batch < 1:
        raise SpecError(f"max-batch must be a positive integer, got {args.max_batch}")
    if args.out:
        _prepare_out(Path(args.out), runfile.writable)
    result = fit.find(scenario, budget, lambda probe: run_scenario(probe, timeout=args.timeout), args.max_batch)
    print(fit.describe(result))
    margin = margins.margin(scenario.framework, scenario.device, margins.published_zoo())
    print("\n".join(explain.wrap(explain.estimate_answer(scenario, budget, args.max_batch, margin))))
    if args.out and not _saved(args.out, result):
        print(json.dumps(result, indent=1))
    return fit.EXIT_CODES[result["answer"]]


def _bench(args: argparse.Namespace) -> int:
    from suites.bench.suite import run_suite

    start = "resume" if args.resume else "fresh" if args.fresh else "merge"
    return run_suite(args.suite, args.device, args.frameworks, args.models, args.timeout, start, args.executor,
                     args.jobs, args.address, args.batches, args.max_batch, args.techniques, not args.no_overlap)


def _check(args: argparse.Namespace) -> int:
    from suites.bench import check
    from suites.report import check_page
    from suites.run.pieces import NAMES

    only = [name for name in args.pieces.split(",") if name]
    for name in only:
        if name not in NAMES:
            raise SpecError(f"unknown piece {name!r}; valid: {', '.join(NAMES)}")
    resolved = device.resolve(args.device)
    missing = device.no_gpu(resolved)
    if missing:
        raise SetupError(missing)
    check_overrides()  # a framework without its tox environment is left out; one a variable names wrongly, refused
    target = Path(args.out) if args.out else check.folder(resolved, args.quick)
    if target.exists() and not target.is_dir():
        raise SpecError(f"--out {args.out}: a file, not a folder")
    wheels = Path(args.wheels) if args.wheels else None
    if wheels and not wheels.is_dir():
        raise SpecError(f"--wheels {args.wheels}: no such folder")
    return check.run_check(target, resolved, args.quick, args.limit, only, check_page.write, wheels)


def _zoo(args: argparse.Namespace) -> int:
    from suites.bench import zoo

    sources = [name for name in args.sources.split(",") if name]
    unknown = [name for name in sources if name not in zoo.SOURCES]
    nets = [name for name in args.nets.split(",") if name]
    known = {name for _, names in zoo.SOURCES.values() for name in names}
    if unknown or not sources:
        raise SpecError(f"unknown source {', '.join(unknown) or '(none)'}; valid: {', '.join(zoo.SOURCES)}")
    trained = [name for name in args.train_nets.split(",") if name]
    if set(nets + trained) - known:
        raise SpecError(f"not a zoo net: {', '.join(sorted(set(nets + trained) - known))} (docs/models.md lists "
                        f"them)")
    out = zoo.run_zoo(Path(args.out) if args.out else None, Path(args.work) if args.work else None, sources, nets,
                      args.frameworks, [] if args.no_train else args.train_frameworks, trained,
                      Path(args.seed) if args.seed else None)
    print(f"python -m suites zoo: wrote {out / 'zoo.md'}")
    return 0


def _run_file(path: str) -> dict:
    """A run file given on the command line; one line (exit 2) where it is not one."""
    try:
        return runfile.load(Path(path))
    except (OSError, ValueError, KeyError) as error:
        raise SpecError(f"{path}: not a run file ({error})") from None


def _compare(args: argparse.Namespace) -> int:
    """The gate: exit 1 where a gated figure grew or nothing was gated, 2 on bad input (nothing written)."""
    from suites.analysis import compare

    if args.store_spread:  # held from before they are read until the spread is stored: no bench writes meanwhile
        for path in (args.base, args.new):
            if Path(path).is_file():  # one that is not is refused below, with nothing made for it
                runfile.lock(Path(path))
    runs = [_run_file(path) for path in (args.base, args.new, *([args.repeat] if args.repeat else []))]
    if not 0 <= args.threshold < math.inf:
        raise SpecError(f"--threshold must be a percentage of zero or more, got {args.threshold:g}")
    # a run against itself moves by nothing: its spread would be zero, gating every view at the bare threshold
    if args.store_spread and Path(args.base).samefile(args.new):
        raise SpecError(f"--store-spread needs two runs of the same code, but BASE and NEW are the same file "
                        f"({args.base}): a run's spread against itself is zero")
    if args.repeat and Path(args.base).samefile(args.repeat):
        raise SpecError(f"--repeat needs a second run of the base's code, but it is the base's own file "
                        f"({args.repeat}): a run's spread against itself is zero")
    for difference in compare.differences(*runs[:2]):
        print(f"python -m suites compare: warning: not like for like: {difference}", file=sys.stderr)
    found, only_base, only_new = compare.changes(*runs[:2])
    if args.repeat or args.store_spread:  # two runs of the same code: how far each framework's views move alone
        by, spread_from = compare.spread(runs[0], runs[-1]), f"measured against {args.repeat or args.new}"
    else:
        by, spread_from = compare.stored_spread(runs[0], args.base) or compare.stored_spread(runs[1], args.new) \
            or ({}, None)
    if args.store_spread:
        if not by:  # an empty spread would replace whatever spread the files had
            raise SpecError(f"--store-spread: {args.base} and {args.new} have no figure in common to measure a "
                            f"spread from ({compare.nothing_gated(*runs[:2])})")
        for path, other in ((args.base, args.new), (args.new, args.base)):
            compare.store_spread(Path(path), Path(other), by)
            print(f"stored the run-to-run spread in {path} ({compare.SPREAD_FIELD})")
    found = compare.with_spread(found, by)
    threshold = args.threshold / 100
    print(compare.render(found, only_base, only_new, threshold, args.all))
    code, ending = compare.verdict(*runs[:2], found, threshold, spread_from)
    print("\n".join(ending))
    return code


def _constants(args: argparse.Namespace) -> int:
    from suites.analysis import constants

    run = _run_file(args.run_file)
    target = Path(args.run_file).parent / f"constants-{run['device']}.json"
    runfile.writable(target)
    taken = constants.from_run(run, target)
    if not taken:
        raise SpecError(f"{args.run_file} has no finished probe record: no constants to take")
    print(f"wrote {target}: constants of {len(taken)} probe records ({', '.join(taken)})")
    return 0


def _errors(args: argparse.Namespace) -> int:
    from suites.analysis import errors

    phases = [phase for phase in (args.phases or "").split(",") if phase]
    known = dict.fromkeys(phase for names in PHASES.values() for phase in names)
    unknown = [phase for phase in phases if phase not in known]
    if unknown:
        raise SpecError(f"--phases: not a phase: {', '.join(unknown)} (phases: {', '.join(known)})")
    print(errors.table([(path, _run_file(path)) for path in args.run_files], phases))
    return 0


def _stories(args: argparse.Namespace) -> int:
    from suites.report import stories

    if args.check:
        current = stories.PAGE.read_text() if stories.PAGE.exists() else ""
        if current != stories.markdown():
            print(f"{stories.PAGE.relative_to(stories.ROOT)} differs from the published runs: run "
                  "`python -m suites stories` and commit it", file=sys.stderr)
            return 1
        print(f"{stories.PAGE.relative_to(stories.ROOT)} matches the published runs")
        return 0
    print(f"wrote {stories.write().relative_to(stories.ROOT)}")
    return 0


def _report(args: argparse.Namespace) -> int:
    from suites.report.render import render

    _run_file(args.run_file)  # one line, exit 2, where it is not a run file
    try:
        written = render(Path(args.run_file))
    except OSError as error:  # a full disk: nothing half-written is left (render writes each file whole or not)
        print(f"python -m suites report: error: cannot write the report of {args.run_file}: "
              f"{error.strerror or error}", file=sys.stderr)
        return 1
    for path in written:
        print(f"wrote {path}")
    return 0


def parser() -> argparse.ArgumentParser:
    top = OneLineParser(prog="python -m suites", description=__doc__)
    commands = top.add_subparsers(dest="command", required=True, parser_class=OneLineParser)

    run = commands.add_parser("run", help="one scenario in a fresh worker; prints its phases")
    run.add_argument("--framework", required=True, choices=frameworks())
    model = run.add_mutually_exclusive_group(required=True)
    model.add_argument("--model", help="a catalogue name (see `models`), plain-N, or a model file")
    model.add_argument("--model-file", help=MODEL_FILE)
    run.add_argument("--scenario", default="train", choices=SCENARIO_KINDS)
    run.add_argument("--size", type=_size, help=SIZE)
    run.add_argument("--batch", type=_batch, help="default: the model's own")
    run.add_argument("--optimizer", default="adam", choices=OPTIMIZERS)
    run.add_argument("--device", default="auto", choices=DEVICES)
    run.add_argument("--allocator", default="default",
                     help="; ".join(f"{name}: {', '.join(mode_names(name))}" for name in frameworks()))
    run.add_argument("--technique", default="none", choices=TECHNIQUES)
    run.add_argument("--execution", default=executions.DEFAULT,
                     help="; ".join(f"{name}: {', '.join(modes)}" for name, modes in executions.MODES.items()))
    run.add_argument("--cuda-module-loading", default="LAZY", choices=CUDA_MODULE_LOADING)
    run.add_argument("--timeout", type=_seconds, default=600.0, help="seconds before the worker is killed")
    run.add_argument("--out", help="also write the whole JSON record here")
    run.add_argument("--json", action="store_true", help="print the whole JSON record instead of the phase table")
    run.set_defaults(action=_run)

    listing = commands.add_parser("models", help="the catalogue with parameter counts")
    listing.add_argument("--model-file", action="append", default=[], help=f"instead: {MODEL_FILE} (repeatable)")
    listing.add_argument("--check", action="store_true", help="prove each file's import: its own weights in each "
                         "framework give the file's own outputs, Keras's counts equal the spec's; exit 1 where not, 2 "
                         "where a file is refused (the others still checked)")
    listing.add_argument("--frameworks", type=_framework_list, default="torch,jax",
                         help="--check's frameworks, comma-separated")
    listing.set_defaults(action=_models)

    guess = commands.add_parser("estimate", help="what a scenario will hold per phase, from its spec")
    model = guess.add_mutually_exclusive_group(required=True)
    model.add_argument("--model", help="a catalogue name (see `models`), plain-N, or a model file")
    model.add_argument("--model-file", help=MODEL_FILE)
    guess.add_argument("--batch", type=_batch, help="default: the model's own")
    guess.add_argument("--size", type=_size, help=SIZE)
    guess.add_argument("--optimizer", default="adam", choices=OPTIMIZERS)
    guess.add_argument("--scenario", default="train", choices=SCENARIO_KINDS)
    guess.add_argument("--framework", choices=frameworks(), help="its rules and measured constants; default: neutral")
    guess.add_argument("--dtype", default="float32", choices=DTYPES)
    guess.add_argument("--technique", default="none", choices=TECHNIQUES)
    guess.add_argument("--device", default="auto", choices=DEVICES)
    guess.add_argument("--gpu", help="the card to estimate for (default: the one NVML sees); a warning where the "
                                     "constants were measured on another")
    guess.add_argument("--gpu-memory", type=_card_memory,
                       help="that card's memory, with a unit as fit's --budget has (e.g. 24GiB; nvidia-smi's "
                            "total), which sizes a default pool "
                            "(JAX's 75 %%); default: NVML's, for the card it sees or the constants' card; else the "
                            "pool's share alone")
    guess.add_argument("--constants", help="a constants file or a run file whose probes give them (e.g. a local "
                                           "run, results/local/default-cpu.json); default: the published run's")
    guess.add_argument("--explain", action="store_true",
                       help="also list the rules of the framework asked about (the neutral ones without --framework), "
                            "one a line, each with its reason")
    guess.add_argument("--budget", help="instead: the largest batch whose estimate fits this size (e.g. 16GiB), per "
                                        "framework without --framework; instant (`fit` measures)")
    guess.add_argument("--layers", action="store_true",
                       help="instead: a table per layer (type, output shape, parameters, bytes kept for the backward "
                            "pass, running total)")
    guess.set_defaults(action=_estimate)

    fits = commands.add_parser("fit", help="the largest batch within a memory budget, by bisection")
    model = fits.add_mutually_exclusive_group(required=True)
    model.add_argument("--model", help="a catalogue name (see `models`), plain-N, or a model file")
    model.add_argument("--model-file", help=MODEL_FILE)
    fits.add_argument("--framework", required=True, choices=frameworks())
    fits.add_argument("--size", type=_size, help=SIZE)
    fits.add_argument("--budget", required=True, help="a size with a case-sensitive unit: B, kB, MB, GB (powers of "
                                                       "10) or KiB, MiB, GiB (powers of 2), e.g. 2GiB, 900MB")
    fits.add_argument("--scenario", default="train", choices=SCENARIO_KINDS)
    fits.add_argument("--optimizer", default="adam", choices=OPTIMIZERS)
    fits.add_argument("--technique", default="none", choices=TECHNIQUES)
    fits.add_argument("--device", default="auto", choices=DEVICES)
    fits.add_argument("--timeout", type=_seconds, default=600.0, help="seconds per probe")
    fits.add_argument("--max-batch", type=int, default=4096, help="the largest batch to try")
    fits.add_argument("--out", help="also write the result and its probes as JSON here")
    fits.set_defaults(action=_fit)

    bench = commands.add_parser("bench", help="run a suite: run file, report, plot in results/local/")
    bench.add_argument("--suite", default="default")
    bench.add_argument("--device", default="auto", choices=DEVICES)
    bench.add_argument("--frameworks", default="", help="comma-separated; default: all")
    bench.add_argument("--models", default="", help="comma-separated names or model files; default: the suite's")
    bench.add_argument("--size", type=_size, help=SIZE)
    bench.add_argument("--batches", default="", help="comma-separated batch grid replacing the suite's (sweeps: "
                                                     "e.g. 10,20,...,200 to see TensorFlow's steps)")
    bench.add_argument("--techniques", default="", help="comma-separated: only the suite's scenarios with these "
                                                        "techniques (default: all)")
    bench.add_argument("--max-batch", type=int, help="fit: the largest batch each question tries "
                                                                "(default: the question's own bound)")
    bench.add_argument("--timeout", type=_seconds, default=600.0, help="seconds per scenario")
    bench.add_argument("--executor", default="local", choices=executors.ENGINES,
                       help="local: on this machine (default); ray: one scenario per GPU on a Ray cluster")
    bench.add_argument("--jobs", type=int, default=1, help="local: scenarios at once (host peaks are per process)")
    bench.add_argument("--address", default="", help="ray: the cluster to join (default: start one here)")
    bench.add_argument("--no-overlap", action="store_true", help="local, one at a time: start each worker only once "
                                                                 "the one before it has exited (default: the next "
                                                                 "imports while the current measures)")
    start = bench.add_mutually_exclusive_group()
    start.add_argument("--resume", action="store_true", help="skip the scenarios the run file already has ok")
    start.add_argument("--fresh", action="store_true", help="start the run file over (default: add or replace "
                                                            "this run's scenarios, keep the others)")
    bench.set_defaults(action=_bench)

    checks = commands.add_parser("check", help="make gpu-check: every piece, resumable, in one folder")
    checks.add_argument("--device", default="auto", choices=DEVICES)
    checks.add_argument("--quick", action="store_true", help="the small form: each piece in small, in "
                                                            "results/local/<card>-<commit>-quick/ (make test runs it)")
    checks.add_argument("--limit", type=_seconds, default=DEFAULT_LIMIT_S,
                        help=f"seconds this call may take (default {DEFAULT_LIMIT_S:g}); the next call goes on "
                             "where it stopped")
    checks.add_argument("--pieces", default="", help="comma-separated pieces to run (again); default: those not "
                                                    "yet ended")
    checks.add_argument("--out", help="the folder (default: results/<card>-<commit>/)")
    checks.add_argument("--wheels", help="a folder of carried wheels (Keras's) to install, offline, into each Keras "
                                         "interpreter that lacks keras (a prepared interpreter: docs/usage.md)")
    checks.set_defaults(action=_check)

    zoo = commands.add_parser("zoo", help="public conv nets imported, checked and trained")
    zoo.add_argument("--sources", default="keras,torchvision,timm,smp,monai,detection,ultralytics,keras-hub",
                     help="comma-separated: keras, torchvision, timm, smp, monai, detection (torchvision's detection "
                          "backbones), ultralytics, keras-hub (default: all)")
    zoo.add_argument("--nets", default="", help="comma-separated nets of the zoo (default: all)")
    zoo.add_argument("--frameworks", type=_framework_list, default="torch,jax",
                     help="where outputs are checked (default torch,jax)")
    zoo.add_argument("--train-frameworks", type=_framework_list, default="torch,jax,keras-jax,keras-tensorflow",
                     help="where a training step is measured beside the estimate (default torch,jax,keras-jax,"
                          "keras-tensorflow)")
    zoo.add_argument("--no-train", action="store_true", help="import and check only")
    zoo.add_argument("--train-nets", default="", help="comma-separated: only these are trained (default: every "
                                                      "imported net; a later call trains the rest)")
    zoo.add_argument("--out", help="the folder (default: results/zoo-<commit>/)")
    zoo.add_argument("--work", help="where the built model files stay, so a second call rebuilds nothing (default: "
                                    "results/local/zoo/)")
    zoo.add_argument("--seed", help="an earlier table's folder: its training records are kept, only the rest are "
                                    "measured (another machine goes on where it stopped)")
    zoo.set_defaults(action=_zoo)

    versus = commands.add_parser("compare", help="two runs by scenario and phase: exit 1 if a peak grew")
    versus.add_argument("base")
    versus.add_argument("new")
    versus.add_argument("--threshold", type=float, default=5.0, help="percent a gated peak may grow (default 5)")
    versus.add_argument("--all", action="store_true", help="list every change, not only those past the threshold")
    spread = versus.add_mutually_exclusive_group()
    spread.add_argument("--repeat", help="a second run of the base's code: gate with the spread of each framework's "
                                         "views between the two (else the spread a run file stores)")
    spread.add_argument("--store-spread", action="store_true", help="BASE and NEW are two runs of the same code: "
                                                                    "store the spread between them in both")
    versus.set_defaults(action=_compare)

    taken = commands.add_parser("constants", help="the estimate's constants from a run file's probes")
    taken.add_argument("run_file")
    taken.set_defaults(action=_constants)

    wrong = commands.add_parser("errors", help="the estimate's errors, unsafe rate: held-out, tuned")
    wrong.add_argument("run_files", nargs="+")
    wrong.add_argument("--phases", help="only these phases, comma-separated (e.g. train_step_2,inference)")
    wrong.set_defaults(action=_errors)

    told = commands.add_parser("stories", help="docs/stories.md from the published run files")
    told.add_argument("--check", action="store_true", help="exit 1 where docs/stories.md differs from the runs")
    told.set_defaults(action=_stories)

    report = commands.add_parser("report", help="render the plot and Markdown report of a run file")
    report.add_argument("run_file")
    report.set_defaults(action=_report)
    return top


def _model_files(args: argparse.Namespace) -> None:
    """Each --model-file of a registered Keras class (a keras-hub backbone) replaced by the functional model it is,
    which Keras saves in a worker (suites/run/keras_rewrap.py), then, with --size, named at that size (`sized_name`):
    every command then reads that."""
    given = getattr(args, "model_file", None)
    if given:
        from suites.run.keras_rewrap import functional_file

        given = [functional_file(path) for path in given] if isinstance(given, list) else functional_file(given)
        args.model_file = given
    size = getattr(args, "size", None)
    if size is None:
        return
    if hasattr(args, "models"):  # bench: every model file of --models
        names = [name for name in args.models.split(",") if name]
        if not any(is_model_file(name) for name in names):
            raise SpecError("--size resizes a model file's input: give model files in --models")
        args.models = ",".join(sized_name(name, *size) if is_model_file(name) else name for name in names)
        return
    if not given and not (args.model and is_model_file(args.model)):
        raise SpecError(f"--size resizes a model file's input; {args.model!r} is a catalogue model: give --model-file")
    if given:
        args.model_file = sized_name(given, *size)
    else:
        args.model = sized_name(args.model, *size)
    load_model(args.model_file or args.model)  # refused here, in one line, where the net fixes its size


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    interrupts.install()
    try:
        _model_files(args)
        return args.action(args)
    except (SpecError, SetupError) as error:
        print(f"python -m suites: error: {error}", file=sys.stderr)
        return USAGE_ERROR
    except KeyboardInterrupt as stop:  # the worker was killed where it was waited for; nothing measured is lost
        print(f"python -m suites: {stop or 'interrupted'}; the run is incomplete", file=sys.stderr)
        return interrupts.EXIT_CODE
    except BrokenPipeError:  # the reader went away (`| head`): what was written is written; no traceback at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
