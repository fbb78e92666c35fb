"""The importers: a model file becomes a spec (`files.load_spec_file`), a Keras model through `keras_file`, an ONNX
model through `onnx_file`. They read a file format (with numpy, onnx, its protobuf and onnxscript where the format
needs them), so they live apart from the specs (models/spec.py), which import none of them; each is imported only
where such a file is read.
"""
