"""A model file as a spec: the one function that reads a user's file (`load_spec_file`), whatever its format.

A JSON spec is read here; a Keras model (a `.keras` file, or the JSON of `to_json()`) and an ONNX model (a `.onnx`
file) go through their importers (`models.importers.keras_file`, `models.importers.onnx_file`), which are imported
only when a file of theirs is read: a worker importing the catalogue never reaches onnx or numpy.
"""

from __future__ import annotations

from pathlib import Path

from models.importers.json_text import parsed_json
from models.record import regular_file
from models.spec import MAX_CONFIG_BYTES, ModelSpec, SpecError, written_channels_last


def load_spec_file(path: str | Path) -> ModelSpec:
    """Reads a user's spec, a Keras model (a `.keras` file, or the JSON of `to_json()`) or an ONNX model (a `.onnx`
    file) through its importer; every failure becomes a one-line SpecError naming the file. What is not a regular
    file, or JSON of more than MAX_CONFIG_BYTES, is refused before it is read."""
    try:
        size = regular_file(path).st_size
    except OSError as exc:
        raise SpecError(f"cannot read model file {path}: {exc.strerror}") from exc
    if Path(path).suffix == ".keras":
        from models.importers.keras_file import load_keras_file

        return load_keras_file(path)
    if Path(path).suffix == ".onnx":
        from models.importers.onnx_file import load_onnx_file

        return load_onnx_file(path)
    if size > MAX_CONFIG_BYTES:
        raise SpecError(f"spec file {path} is {size:,} bytes, more than the {MAX_CONFIG_BYTES:,} a spec or a Keras "
                        f"config is read up to")
    try:
        text = Path(path).read_bytes()
    except OSError as exc:
        raise SpecError(f"cannot read spec file {path}: {exc.strerror}") from exc
    data = parsed_json(text, f"spec file {path}")
    from models.importers.keras_file import is_keras_config, spec_from_keras

    if is_keras_config(data):
        return spec_from_keras(data, str(path))
    try:
        return written_channels_last(ModelSpec.from_dict(data))
    except (SpecError, TypeError) as exc:  # TypeError: a wrongly typed field reaching a dataclass
        raise SpecError(f"spec file {path}: {exc}") from exc
