"""A registered Keras class (keras-hub's backbones) as the functional model it is: the importer reads a model's
layers, which such a file's config does not hold (it holds the arguments its class is built with). Keras builds it
in a Keras worker, where the class's package is installed, and saves `keras.Model(inputs, outputs)`; every command
then reads that file in the user's file's place. Only the Keras team's packages, which Keras imports itself: a file
never makes the suite import a package it names.
"""

from __future__ import annotations

import hashlib
import subprocess
import tempfile
from pathlib import Path

from models.importers.files import load_spec_file
from models.importers.keras_file import KERAS_TEAM_PACKAGES, RegisteredKerasClass
from models.spec import SpecError
from suites.run.orchestrator import worker_environment
from suites.run.registry import ROOT, SetupError, interpreter

# The Keras interpreters a rewrap may run in, the first that exists: the zoo's has keras-hub (`make zoo`)
KERAS_ENVS = ("zoo-keras", "keras-tensorflow")
QUIET = {"KERAS_BACKEND": "tensorflow", "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "3"}
TIMEOUT_S = 600


def functional_file(path: str) -> str:
    """`path`, or where it is a registered class of a Keras-team package, that model saved as a functional one (in
    the system's temporary folder, named by the file's bytes: a second command reuses it)."""
    if Path(path).suffix != ".keras":
        return path
    try:
        load_spec_file(path)
        return path
    except RegisteredKerasClass as refused:
        if refused.package not in KERAS_TEAM_PACKAGES:
            raise
        package = refused.package
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
    out = Path(tempfile.gettempdir()) / "footprint-rewrapped" / f"{Path(path).stem}-{digest}.keras"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = out.with_suffix(".partial.keras")
        done = subprocess.run([_keras_interpreter(), "-m", "frameworks.worker", "keras-rewrap",
                               str(Path(path).resolve()), package, str(partial)], cwd=ROOT,
                              env=worker_environment() | QUIET, capture_output=True, text=True, timeout=TIMEOUT_S)
        if done.returncode:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise SpecError(f"{path}: a registered Keras class of {package}, which Keras could not build as a "
                            f"functional model: {last}")
        partial.replace(out)
    try:  # a refusal names the user's file, not this temporary one
        load_spec_file(out)
    except SpecError as error:
        raise SpecError(str(error).replace(str(out), f"{path} (as the functional model it builds)")) from error
    return str(out)


def _keras_interpreter() -> str:
    for env in KERAS_ENVS:
        try:
            return interpreter(env)
        except SetupError:
            continue
    raise SetupError("no Keras interpreter to build a registered Keras class in: run `make envs`")
