"""`python -m suites zoo` (`make zoo`): the public conv nets, as their users have them, through the suite.

Each net of `keras.applications`, of torchvision (its classifiers and segmentation nets) and of timm is built in its
own source with weights=None at a small input (frameworks/zoo_sources.py; Keras as a `.keras` file, torchvision's and
timm's exported to ONNX from train() with optimize=False), then imported as a user's file is. Per net the table says:
imported, or the importer's one-line reason; the spec's counts against the source's; the largest output difference
per framework with the file's own weights (`models --check`, suites/run/import_check.py); and the estimate's error on
a training step at batch 8 on this CPU per framework (the rise of train step 2 and of the inference after it, the
driver's view), and for the nets of LARGE_NETS again at LARGE_SIZE, the size users train at. Its head is the
field's figures on the held-out and tuned halves of the split (models/zoo_split.py) and on each size apart, with the
margin the held-out half asks for at both sizes (suites/analysis/margins.py reads it). Written to
`results/zoo-<commit>/`: zoo.json (self-describing) and zoo.md (the table), after each step. The built files and the
run file of the training steps (`python -m suites errors` reads it; each record names its commit) stay in
results/local/zoo/ (git-ignored): a second call rebuilds nothing and trains only what the run file lacks.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from models import zoo_split
from models.estimate import RULES, activations
from models.importers.files import load_spec_file
from models.protocol import write_scenario
from models.record import atomic_write_json
from models.scenario import Scenario
from models.spec import ModelSpec, SpecError
from suites.analysis import accounting, constants, depth, errors
from suites.bench import zoo_records
from suites.report.zoo_table import markdown
from suites.run import environment, import_check
from suites.run.keras_rewrap import functional_file
from suites.run.orchestrator import run_scenario, worker_environment
from suites.run.registry import ROOT, SetupError, interpreter
from suites.run.runfile import RunFile, commits, identity

SCHEMA_VERSION = 1
MB = 1e6
KIND = "footprint-zoo"
SIZE = 64  # pixels a side: small enough for every net's training step on a CPU, large enough for every stem
LARGER = 75  # the least InceptionV3, InceptionResNetV2 and Xception take (Keras)
INCEPTION_AUX = 299  # torchvision's inception_v3 with its auxiliary logits, as it trains: the auxiliary head's 5x5
# conv over its pooled 17x17 map needs the size Inception v3 is trained at
KERAS_NETS = {name: LARGER if name in ("InceptionV3", "InceptionResNetV2", "Xception") else SIZE for name in (
    "ConvNeXtTiny", "ConvNeXtSmall", "ConvNeXtBase", "ConvNeXtLarge", "ConvNeXtXLarge",
    "DenseNet121", "DenseNet169", "DenseNet201",
    *(f"EfficientNetB{index}" for index in range(8)),
    *(f"EfficientNetV2{size}" for size in ("B0", "B1", "B2", "B3", "S", "M", "L")),
    "InceptionV3", "InceptionResNetV2", "MobileNet", "MobileNetV2", "MobileNetV3Small", "MobileNetV3Large",
    "NASNetMobile", "NASNetLarge", "ResNet50", "ResNet101", "ResNet152", "ResNet50V2", "ResNet101V2", "ResNet152V2",
    "VGG16", "VGG19", "Xception")}
# VGG's and AlexNet's classifiers pool the map to 7x7 and 6x6 whatever its size: at 64 pixels an adaptive average
# pool from 2x2 and 1x1 (the spec's adaptive_avgpool2d), so they too are built at 64
TORCHVISION_NETS = {name: INCEPTION_AUX if name == "inception_v3" else SIZE for name in (
    "resnet18", "resnet50", "resnext50_32x4d", "wide_resnet50_2", "vgg11", "vgg11_bn", "alexnet", "squeezenet1_1",
    "densenet121", "googlenet", "inception_v3", "mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_large",
    "mnasnet0_5", "shufflenet_v2_x0_5", "efficientnet_b0", "efficientnet_v2_s", "regnet_y_400mf", "convnext_tiny")}
SEGMENTATION_NETS = ("fcn_resnet50", "deeplabv3_mobilenet_v3_large", "lraspp_mobilenet_v3_large")
TORCHVISION_NETS |= {name: SIZE for name in SEGMENTATION_NETS}
# timm's conv nets (no attention block), `pretrained=False` at its defaults: one to six of each of the 35 families
# models/zoo_split.py names, from each family's small end (a CPU trains each at batch 8); a net whose name
# torchvision's has (densenet121, inception_v3, efficientnet_b0) is left to torchvision. Those the importer refuses
# are rows too: the table says why.
TIMM_NETS = {name: SIZE for name in (
    "resnet10t", "resnet14t", "resnet26d", "resnet34d", "resnetv2_50", "resnet33ts", "resnetrs50", "seresnet18",
    "seresnext26d_32x4d", "ecaresnet26t", "gcresnet33ts", "skresnet18", "res2net50_14w_8s", "resnest14d",
    "cspresnet50", "cspresnext50", "cspdarknet53", "cs3darknet_s", "darknet53", "dla34", "dla46_c", "dla46x_c",
    "dpn68", "ghostnet_100", "ghostnetv2_100", "repghostnet_050", "hrnet_w18_small", "rexnet_100", "regnetx_002",
    "regnety_002", "regnetz_b16", "selecsls42b", "ese_vovnet19b_dw", "ese_vovnet19b_slim_dw", "gernet_s",
    "repvgg_a0", "mobileone_s0", "mobilenetv2_050", "mobilenetv3_large_100", "mobilenetv3_small_050",
    "mobilenetv4_conv_small", "efficientnet_lite0", "efficientnet_es", "tf_efficientnet_b0", "tinynet_a", "mixnet_s",
    "mnasnet_100", "semnasnet_050", "fbnetc_100", "spnasnet_100", "lcnet_050", "hardcorenas_a", "xception41",
    "convnext_atto", "convnextv2_atto", "inception_next_atto", "hgnet_tiny", "hgnetv2_b0", "starnet_s1",
    "fastvit_t8", "nf_resnet26", "nf_regnet_b0",
    # issue 71: ten families more (metaformer's pooling and conv mixers, group-norm ResNet, RDNet, ConvMixer, MambaOut,
    # PNASNet, RepViT, TResNet, BiT, FocalNet), and three nets of families the zoo has, built as new users build them
    "poolformer_s12", "convformer_s18", "resnet50_gn", "rdnet_tiny", "convmixer_768_32", "mambaout_femto",
    "pnasnet5large", "repvit_m0_9", "tresnet_m", "resnetv2_50x1_bit", "focalnet_tiny_srf", "efficientnetv2_rw_t",
    "ghostnetv3_050", "mobilenetv1_100")}
# Dense prediction at the sizes its users train where a CPU trains them at batch 8 (issue 71): segmentation 256,
# detection 320; a YOLO classifier at 224, its own default
DENSE_SIZE, DETECTION_SIZE, YOLO_CLASSIFIER_SIZE = 256, 320, 224
SMP_NETS = {f"smp_{arch}": DENSE_SIZE for arch in ("Unet", "UnetPlusPlus", "FPN", "Linknet", "DeepLabV3Plus", "PSPNet",
                                                   "PAN", "MAnet")}
MONAI_NETS = {name: DENSE_SIZE for name in ("monai_UNet", "monai_BasicUNet", "monai_SegResNet", "monai_AttentionUnet",
                                            "monai_DenseNet121")}
DETECTION_NETS = {name: DETECTION_SIZE for name in ("fpn_resnet18", "fpn_mobilenet_v3_large")}
ULTRALYTICS_NETS = {"yolov8n": DETECTION_SIZE, "yolov8n-seg": DETECTION_SIZE, "yolov8n-cls": YOLO_CLASSIFIER_SIZE}
KERAS_HUB_NETS = {name: SIZE for name in ("hub_ResNet18", "hub_ResNet50", "hub_VGG16", "hub_DenseNet121",
                                           "hub_MiT_B0")}
SOURCES = {"keras": ("keras-tensorflow", KERAS_NETS), "torchvision": ("zoo-torch", TORCHVISION_NETS),
           "timm": ("zoo-torch", TIMM_NETS), "smp": ("zoo-torch", SMP_NETS), "monai": ("zoo-torch", MONAI_NETS),
           "detection": ("zoo-torch", DETECTION_NETS), "ultralytics": ("zoo-torch", ULTRALYTICS_NETS),
           "keras-hub": ("zoo-keras", KERAS_HUB_NETS)}
TRAIN_BATCH = 8
# The size users train at: the nets below are built and trained again at it, in the frameworks below (the estimate's
# error at 64 px need not be its error at 224, where activations outweigh the weights). Twelve held-out nets of
# twelve families, judged there; and eight tuned nets of the four tuned families, whose records the depth costs are
# fitted on (suites.analysis.depth), so that the rules meet the size users train at on nets they may be tuned on
LARGE_SIZE = 224
LARGE_FRAMEWORKS = ("torch", "jax")
LARGE_HELD_OUT = ("efficientnet_lite0", "ghostnet_100", "mixnet_s", "mnasnet_100", "regnetx_002", "rexnet_100",
                  "cspresnet50", "convnext_atto", "lcnet_050", "repvgg_a0", "squeezenet1_1",
                  "lraspp_mobilenet_v3_large")
LARGE_TUNED = ("resnet18", "resnet10t", "resnet26d", "mobilenet_v2", "mobilenet_v3_small", "mobilenetv3_large_100",
               "densenet121", "vgg11_bn")
LARGE_NETS = LARGE_HELD_OUT + LARGE_TUNED
# The rebuilds whose saved-for-backward bytes are set beside the source module's own (frameworks/zoo_sources.py), at
# the zoo's size and TRAIN_BATCH: autograd's saved-tensor hooks measure both sides alike
SAVED_FRAMEWORKS = ("torch", "keras-torch")
EXPLAINED = 0.01  # a rebuild's extra bytes are the ones its rules keep beyond torch's within this share of its total
# the phases the estimate is judged on, and the key of each net's error in the table, in the driver's view
EVALUATED = {"train_step_2": "estimate_error", "inference": "inference_error"}
EVALUATED_VIEW = "driver"
SOURCE_TIMEOUT_S = 3600.0
SCENARIO_TIMEOUT_S = 900.0


@dataclass
class Row:
    """One net's line of the table."""

    source: str
    name: str
    size: int
    source_counts: tuple[int, int] | None = None  # the source's parameters and statistics
    spec_counts: tuple[int, int] | None = None  # the imported spec's
    reason: str | None = None  # why it is not imported (or not built), in one line
    check: dict[str, float] = field(default_factory=dict)  # framework -> the largest relative output difference
    check_reason: str | None = None  # why its outputs could not be compared
    rounding: float | None = None  # the source's float32 answer against its float64 one, relative (Keras's nets)
    train: dict[str, dict] = field(default_factory=dict)  # framework -> status and the estimate's error
    train_large: dict[str, dict] = field(default_factory=dict)  # the same at LARGE_SIZE (LARGE_NETS only)
    # what the training step keeps for its backward, in bytes: the source's own module's ("module") and each rebuild's
    # (SAVED_FRAMEWORKS), with "note": equal, or the difference and what explains it (a torch module's nets only)
    saved: dict[str, object] = field(default_factory=dict)

    @property
    def imported(self) -> bool:
        return self.spec_counts is not None


def _short_commit() -> str:
    commit = environment.git_commit()
    return commit[:7] + ("-dirty" if "+dirty" in commit else "") if re.match(r"[0-9a-f]{7}", commit) else "unknown"


def build_sources(source: str, names: list[str], folder: Path, size: int | None = None) -> dict[str, dict]:
    """Each net's file and its source's counts (or why the source failed), built once at its size in the zoo (or
    at `size`): `sources.json` keeps them."""
    known_path = folder / "sources.json"
    known = json.loads(known_path.read_text()) if known_path.exists() else {}
    nets = {name: size or SOURCES[source][1][name] for name in names}
    wanted = [name for name in names if "error" in known.get(name, {"error": "not built"})
              or known[name].get("size") != nets[name] or not Path(known[name]["file"]).exists()]
    module = source not in ("keras", "keras-hub")  # a torch module: its own saved bytes are measured beside it
    wanted += [name for name in names if module and name not in wanted and "saved_bytes" not in known[name]]
    if wanted:
        done = subprocess.run([interpreter(SOURCES[source][0]), "-m", "frameworks.zoo_sources", source, str(folder),
                               *([f"--saved-batch={TRAIN_BATCH}"] if module else []),
                               *(f"{name}={nets[name]}" for name in wanted)], cwd=ROOT, capture_output=True, text=True,
                              timeout=SOURCE_TIMEOUT_S, env=worker_environment() | import_check.KERAS_QUIET)
        for line in done.stdout.splitlines():
            if line.startswith("{"):
                entry = json.loads(line)
                name = entry.pop("name")
                known[name] = entry | {"size": nets[name]}
        for name in wanted:
            known.setdefault(name, {"error": f"{source} stopped (exit {done.returncode}): "
                                             f"{(done.stderr.strip().splitlines() or ['no output'])[-1][:200]}"})
        atomic_write_json(known_path, known)
    return {name: known[name] for name in names}


def _folder(work: Path, name: str) -> Path:
    folder = work / name
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _import(row: Row, built: dict) -> ModelSpec | None:
    """The spec of a built file, or None with the row's reason."""
    if "error" in built:
        row.reason = f"its source could not build it: {built['error']}"
        return None
    row.source_counts = (built["parameters"], built["statistics"])
    row.saved = {"module": built["saved_bytes"]} if "saved_bytes" in built else {}
    try:
        built["file"] = functional_file(built["file"])  # a keras-hub backbone saved as itself: the model it builds
        spec = load_spec_file(built["file"])
    except SpecError as error:
        row.reason = str(error).removeprefix(f"{built['file']}: ")
        return None
    row.spec_counts = (spec.param_count, spec.statistics_count)
    return spec


def _fingerprint(path: str, spec: ModelSpec) -> str:
    """What a file's check proves: its bytes and the spec the importer makes of them today."""
    digest = hashlib.sha256(Path(path).read_bytes())
    digest.update(json.dumps(spec.to_dict(), sort_keys=True).encode())
    return digest.hexdigest()


def _check(rows: dict[str, Row], files: dict[str, str], specs: dict[str, ModelSpec], frameworks: list[str],
           work: Path) -> None:
    """`models --check` of every imported file at once; a file its reference cannot compute is taken out with the
    reason, and the rest checked again. A file whose bytes and imported spec are those a check already proved in
    these frameworks (`checks.json` in `work`, with the commit that checked it) is not checked again."""
    known_path = work / "checks.json"
    known = json.loads(known_path.read_text()) if known_path.exists() else {}
    fingerprints = {name: _fingerprint(path, specs[name]) for name, path in files.items()}
    remaining = {}
    for name, path in files.items():
        found = known.get(path, {})
        if found.get("fingerprint") == fingerprints[name] and set(frameworks) <= set(found["check"]):
            rows[name].check = {framework: found["check"][framework] for framework in frameworks}
            rows[name].rounding = found["rounding"]
        else:
            remaining[name] = path
    print(f"zoo: checking the outputs of {len(remaining)} ({len(files) - len(remaining)} checked before, the same "
          f"file and spec)", flush=True)
    while remaining:
        try:
            proofs = import_check.check(list(remaining.values()), frameworks)
        except SpecError as error:
            culprit = next((name for name, path in remaining.items() if str(error).startswith(f"{path}: ")), None)
            for name in [culprit] if culprit else list(remaining):
                rows[name].check_reason = str(error).removeprefix(f"{remaining[name]}: ")
                del remaining[name]
            continue
        for name, path in remaining.items():
            rows[name].check = {agreement.framework: agreement.difference / agreement.scale if agreement.scale
                                else float("nan") for agreement in proofs[path].agreements}
            rows[name].rounding = proofs[path].rounding
            known[path] = {"fingerprint": fingerprints[name], "check": rows[name].check,
                           "rounding": rows[name].rounding, "git_commit": environment.git_commit()}
        atomic_write_json(known_path, known)
        return


def _saved(rows: dict[str, Row], files: dict[str, str], specs: dict[str, ModelSpec], work: Path) -> None:
    """Beside each torch module's own saved-for-backward bytes, each rebuild's (SAVED_FRAMEWORKS): its worker's steps
    job, one net a process (a net one framework cannot build fails alone), at the zoo's size and batch, kept in
    `saved.json` in `work` by the file's fingerprint; and the row's note (`saved_note`)."""
    known_path = work / "saved.json"
    known = json.loads(known_path.read_text()) if known_path.exists() else {}
    for name, row in rows.items():
        if "module" not in row.saved or name not in files:
            continue
        key = _fingerprint(files[name], specs[name])
        for framework in SAVED_FRAMEWORKS:
            if framework not in known.get(key, {}):
                print(f"zoo: what {name}'s rebuild keeps in {framework}", flush=True)
                known.setdefault(key, {})[framework] = _saved_by_the_rebuild(framework, files[name],
                                                                             _folder(work / "saved", name))
                atomic_write_json(known_path, known)
            row.saved[framework] = known[key][framework]
        row.saved["note"] = saved_note(specs[name], row.saved)


def _saved_by_the_rebuild(framework: str, path: str, folder: Path) -> int | str:
    """The bytes the rebuild's first training step keeps for its backward (the worker's steps job), or why not."""
    scenario = Scenario.create(framework, None, path, kind="train", batch=TRAIN_BATCH, device="cpu")
    try:
        done = subprocess.run([interpreter(framework), "-m", "frameworks.worker", "steps",
                               write_scenario(scenario.to_dict(), folder)], cwd=ROOT, capture_output=True, text=True,
                              timeout=SCENARIO_TIMEOUT_S, env=worker_environment())
    except subprocess.TimeoutExpired:
        return f"not measured: no answer in {SCENARIO_TIMEOUT_S:.0f} s"
    except SetupError as error:  # its environment is not built here
        return f"not measured: {error}"
    if done.returncode:
        return f"not measured: {(done.stderr.strip().splitlines() or ['no output'])[-1][:200]}"
    return int(json.loads(done.stdout)[0][0]["saved_activation_bytes"])


def saved_note(spec: ModelSpec, saved: dict[str, object]) -> str:
    """Each rebuild against the module: equal, or its extra bytes and whether its rules explain them (the bytes its
    rules keep beyond torch's, whose rules keep what autograd lists for torch's own ops, within EXPLAINED of its
    total: Keras on torch's channels-first copies and composed batch norm), else DIFFERS."""
    module, parts = saved["module"], []
    for framework in SAVED_FRAMEWORKS:
        rebuild = saved.get(framework)
        if not isinstance(rebuild, int) or not isinstance(module, int):
            parts.append(f"{framework} {rebuild or 'not measured'}")
            continue
        extra = rebuild - module
        if not extra:
            parts.append(f"{framework} equal")
            continue
        beyond = (activations(spec, RULES[framework], TRAIN_BATCH, 4).saved
                  - activations(spec, RULES["torch"], TRAIN_BATCH, 4).saved)
        explained = abs(extra - beyond) <= EXPLAINED * rebuild
        why = f", what its rules keep beyond torch's ({beyond / MB:+,.1f})" if explained else " DIFFERS"
        parts.append(f"{framework} {extra / MB:+,.1f} MB{why}")
    return "; ".join(parts)


Key = tuple[str, str, int]  # a training scenario's net, framework and input size


def _train(rows: dict[str, Row], scenarios: dict[Key, Scenario], run: RunFile, train_only: list[str],
           written: Callable[[list[dict], list[errors.Row], dict], None]) -> None:
    """Each net's training steps in each framework and size (those the run file already has ok are kept;
    `train_only`: only those nets are measured), the table written again after each net measured and once at the
    end, with the records it reads (each writing fits the tuned half again: ten seconds for 240 records, ten
    minutes were it every net's)."""
    written_once = False
    for name, size in dict.fromkeys((name, size) for name, _, size in scenarios):
        wanted = [(framework, scenario) for (net, framework, at), scenario in scenarios.items()
                  if (net, at) == (name, size) and (not train_only or name in train_only) and not run.has_ok(scenario)]
        for framework, scenario in wanted:
            print(f"zoo: training {name} in {framework} at {size} px", flush=True)
            run.add(run_scenario(scenario, timeout=SCENARIO_TIMEOUT_S))
        if wanted:
            written(*_estimate_errors(rows, run, scenarios))
            written_once = True
    if not written_once:  # nothing measured: the table of the records the run file had
        written(*_estimate_errors(rows, run, scenarios))


def _estimate_errors(rows: dict[str, Row], run: RunFile,
                     scenarios: dict[Key, Scenario]) -> tuple[list[dict], list[errors.Row], dict]:
    """Each trained net's status and the estimate's errors, from the records of the nets as built now (a record of
    an earlier build of the file, at another size or path, is another scenario and is left out), read again with
    today's rules and the published probes' constants, with the depth costs the tuned half's records measure
    (suites.analysis.depth); returns those records, the evaluated errors (`EVALUATED`) and the depth costs."""
    current = {identity(scenario.to_dict()): (name, size) for (name, _, size), scenario in scenarios.items()}
    records = [record for key, record in run.records.items() if key in current]
    base, source = constants.load("cpu", with_depth=False), constants.published_name("cpu")
    fitted = depth.fit(accounting.reaccount({"records": records}, base or {}, source), source)
    accounted = accounting.reaccount({"records": records}, depth.merged(base, fitted, source) or {},
                                     f"{source} with the depth costs of the zoo's tuned half")
    evaluated = [row for row in errors.rows({"records": accounted}, EVALUATED)
                 if row.view == EVALUATED_VIEW and row.source == "footprint"]
    errors_of = {(row.model, row.framework, row.phase): row.error for row in evaluated}
    for record in accounted:
        scenario = record["scenario"]
        name, size = current[identity(scenario)]
        row = rows[name]
        (row.train_large if size == LARGE_SIZE else row.train)[scenario["framework"]] = {
            "status": record["status"], **{key: errors_of.get((scenario["model"], scenario["framework"], phase))
                                           for phase, key in EVALUATED.items()}}
    return records, evaluated, fitted


def _figures(group: list[errors.Row], framework: str, margin: float | None) -> dict:
    """A group's median, 90th percentile and largest error, its unsafe rate, and its unsafe rate with `margin`."""
    figures = errors.summary(group)[(framework, EVALUATED_VIEW, "footprint")]
    return {"nets": len({row.net for row in group}), "n": figures["n"], "median": figures["median"],
            "p90": figures["p90"], "max": figures["worst"].error,
            "worst": figures["worst"].net or figures["worst"].model,  # a model file's net, not its path
            "unsafe": figures["unsafe"],
            "unsafe_with_margin": None if margin is None else sum(row.unsafe(margin) for row in group) / len(group)}


def evaluation(evaluated: list[errors.Row], nets: list[str]) -> dict:
    """The field's figures per framework, half of the split (models/zoo_split.py) and size (the zoo's own; and
    `LARGE_SIZE`, under "large"): the median, 90th percentile and largest error, the unsafe rate, and the held-out
    half's margin with the unsafe rate of each group once it is applied. The margin is fitted to hold at both
    sizes: the larger of the held-out half's `errors.margin` at each; `nets`: the table's, listed by half."""
    found: dict[str, dict] = {}
    large: dict[str, dict] = {}
    for framework in dict.fromkeys(row.framework for row in evaluated):
        ours = [row for row in evaluated if row.framework == framework]
        by_size = {size: [row for row in ours if (row.size == LARGE_SIZE) == (size == LARGE_SIZE)]
                   for size in (SIZE, LARGE_SIZE)}
        margins = {size: errors.margin(held_out) for size, group in by_size.items()
                   if (held_out := [row for row in group if row.half == zoo_split.HELD_OUT])}
        margin = max(margins.values()) if margins else None
        for size, group in by_size.items():
            for half in zoo_split.HALVES:
                if members := [row for row in group if row.half == half]:
                    figures = _figures(members, framework, margin)
                    if half == zoo_split.HELD_OUT:
                        figures |= {"margin": margin, "margin_at_size": margins.get(size)}
                    (large if size == LARGE_SIZE else found).setdefault(framework, {})[half] = figures
    return {"device": "cpu", "phases": list(EVALUATED), "view": EVALUATED_VIEW, "quantile": errors.MARGIN_QUANTILE,
            "unsafe": f"the share of (net, phase) where the estimate is below the measured peak by more than "
                      f"{errors.UNSAFE_SHORTFALL:.0%}", "split": "models/zoo_split.py",
            "margin": "the larger of the held-out half's margins at each size, so that it holds at both",
            "halves": {half: [name for name in nets if zoo_split.half_of(name) == half] for half in zoo_split.HALVES},
            "frameworks": found, "large": {"size": LARGE_SIZE, "frameworks": large}}


def run_zoo(out: Path | None, work: Path | None, sources: list[str], only: list[str], check_frameworks: list[str],
            train_frameworks: list[str], train_only: list[str], seed: Path | None = None) -> Path:
    """Builds (into `work`), imports, checks and trains every net asked for (`train_only`: only those are
    trained; `seed`: an earlier table's folder whose records are taken before training), writing the table after
    each step; returns its folder."""
    seeded = zoo_records.read(seed) if seed else []
    out = out or ROOT / "results" / f"zoo-{_short_commit()}"
    work = work or ROOT / "results" / "local" / "zoo"
    out.mkdir(parents=True, exist_ok=True)
    rows: dict[str, Row] = {}
    files: dict[str, str] = {}
    specs: dict[str, ModelSpec] = {}
    large_files: dict[str, str] = {}
    for source in sources:
        names = [name for name in SOURCES[source][1] if not only or name in only]
        if not names:
            continue
        for name, built in build_sources(source, names, _folder(work, source)).items():
            rows[name] = Row(source, name, SOURCES[source][1][name])
            spec = _import(rows[name], built)
            if spec:
                files[name], specs[name] = built["file"], spec
        large = [name for name in names if name in LARGE_NETS and name in files]
        built_large = build_sources(source, large, _folder(work, f"{source}-{LARGE_SIZE}"), LARGE_SIZE) if large \
            else {}
        for name, built in built_large.items():
            large_row = Row(source, name, LARGE_SIZE)
            if _import(large_row, built):
                large_files[name] = built["file"]
            else:
                rows[name].train_large = {framework: {"status": f"not imported at {LARGE_SIZE} px: {large_row.reason}"}
                                          for framework in LARGE_FRAMEWORKS}

    def written(used: list[dict], evaluated: list[errors.Row], fitted: dict) -> None:
        """The table, with `used`: the training records it reads, `evaluated`: the estimate's errors on them, and
        `fitted`: the depth costs their tuned half measures."""
        data = {"schema_version": SCHEMA_VERSION, "kind": KIND, "git_commit": environment.git_commit(),
                "machine": environment.machine(), "written_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "train": {"batch": TRAIN_BATCH, "device": "cpu", "frameworks": train_frameworks,
                          "error": "the estimate's relative error on the rise of train step 2 / of the inference "
                                   "after it (driver's view)",
                          "records_by_commit": commits({"records": used}),  # a resumed run's are older
                          "large": {"size": LARGE_SIZE, "nets": [name for name in LARGE_NETS if name in rows],
                                    "frameworks": [fw for fw in train_frameworks if fw in LARGE_FRAMEWORKS]}},
                "saved": {"frameworks": list(SAVED_FRAMEWORKS), "batch": TRAIN_BATCH, "explained": EXPLAINED,
                          "what": "the bytes a training step keeps for its backward (autograd's saved-tensor hooks, "
                                  "each storage once, weights, batch and targets left out): the source's own torch "
                                  "module's beside each rebuild's, at the zoo's size"},
                "check": {"frameworks": check_frameworks, "tolerance": import_check.RELATIVE_TOLERANCE,
                          "difference": "largest absolute output difference over the reference's largest value",
                          "rounding": "the source's own float32 output against its float64 one, the same measure"},
                "evaluation": evaluation(evaluated, list(rows)), "depth": fitted,
                "rows": [asdict(row) | {"half": zoo_split.half_of(row.name)} for row in rows.values()]}
        atomic_write_json(out / "zoo.json", data)
        (out / "zoo.md").write_text(markdown(data))
        if used:
            zoo_records.write(out, used)

    print(f"zoo: {len(files)} of {len(rows)} nets imported", flush=True)
    _check(rows, files, specs, check_frameworks, work)
    _saved(rows, files, specs, work)
    written([], [], {})
    if train_frameworks:
        run = RunFile("zoo", "cpu", work / "zoo-cpu.json")  # beside the built files it names, never published
        trained = [(name, rows[name].size, path, train_frameworks) for name, path in files.items()] + [
            (name, LARGE_SIZE, path, [framework for framework in train_frameworks if framework in LARGE_FRAMEWORKS])
            for name, path in large_files.items()]  # every net at its zoo size first
        scenarios = {(name, framework, size): Scenario.create(framework, None, path, kind="train",
                                                              batch=TRAIN_BATCH, device="cpu")
                     for name, size, path, frameworks in trained for framework in frameworks}
        if seeded:
            print(f"zoo: {zoo_records.take(run, scenarios.values(), seeded)} records taken from {seed}", flush=True)
        _train(rows, scenarios, run, train_only, written)
        run.finish()
    return out
