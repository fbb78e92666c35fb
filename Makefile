# make bench [SUITE=default] [DEVICE=auto|cpu|cuda] [FRAMEWORKS=torch,keras-jax] [MODELS=keras-small] [TIMEOUT=600]
#            [START=--resume|--fresh] [JOBS=2] [BATCHES=10,20,30]
# make gpu-check [DEVICE=auto|cpu|cuda] [QUICK=1] [LIMIT=540] [PIECES=default,fit] [OUT=folder] [WHEELS=.whl]
# make zoo [NETS=resnet18,MobileNetV2] [SEED=results/zoo-<commit>]
# make test
PYTHON ?= python3
TOOLS := .venv-tools
TOX := $(TOOLS)/bin/tox
SUITE ?= default
DEVICE ?= auto
FRAMEWORKS ?=
MODELS ?=
TIMEOUT ?= 600
START ?=
JOBS ?= 1
BATCHES ?=
LIMIT ?=
PIECES ?=
QUICK ?=
OUT ?=
WHEELS ?=
NETS ?=

.PHONY: bench gpu-check zoo test envs clean FORCE

# Python 3.11 to 3.13 (README.md says why not the others), refused otherwise before anything is built. A tools env
# made by another Python (an earlier PYTHON=) is remade: its tox would make every env with that Python.
SUPPORTED_PYTHONS := 3.11 3.12 3.13
version_of = $(shell $(1) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
PYTHON_VERSION := $(call version_of,$(PYTHON))
SUPPORTED := $(filter $(PYTHON_VERSION),$(SUPPORTED_PYTHONS))
REFUSAL = $(PYTHON) is $(if $(PYTHON_VERSION),Python $(PYTHON_VERSION),no Python that runs here); footprint needs \
	Python 3.11 to 3.13 (README.md says why): PYTHON=python3.12, say
$(TOX): $(if $(and $(SUPPORTED),$(filter $(PYTHON_VERSION),$(call version_of,$(TOOLS)/bin/python))),,FORCE)
	$(if $(SUPPORTED),,$(error $(REFUSAL)))
	$(PYTHON) -m venv --clear $(TOOLS)
	$(TOOLS)/bin/pip install --quiet tox==4.67.15

# Where nvidia-smi sees a GPU (and DEVICE is not cpu), the frameworks' CUDA builds are installed too.
GPU := $(shell [ "$(DEVICE)" != cpu ] && nvidia-smi -L >/dev/null 2>&1 && echo yes)
comma := ,
space := $(subst ,, )
FRAMEWORK_ENVS := torch jax keras-tensorflow keras-jax keras-torch
# frameworks' envs, each with its CUDA build's where there is a GPU
with_cuda = $(1) $(if $(GPU),$(addsuffix -cuda,$(1)))
# a bench's: FRAMEWORKS' (the known names: an unknown one is refused by the bench, naming the valid ones), else all
BENCH_FRAMEWORKS := $(if $(FRAMEWORKS),$(filter $(subst $(comma),$(space),$(FRAMEWORKS)),$(FRAMEWORK_ENVS)),$(FRAMEWORK_ENVS))
SUITE_ENVS := $(call with_cuda,$(FRAMEWORK_ENVS)) bench
ENVS := $(SUITE_ENVS) test one-interpreter

# PyTorch's CPU index, for torch's +cpu build (tox.ini), only where pip finds that build without it: an index pip
# cannot reach costs ~7.5 s a package looked up, and the question ~1.3 s (measured where only a local wheel has it).
TORCH_CPU_INDEX := https://download.pytorch.org/whl/cpu
torch_index = $(shell $(TOOLS)/bin/pip install --dry-run --no-deps -q "$$(grep -m1 -o 'torch==[^ ]*+cpu' tox.ini)" \
	>/dev/null 2>&1 || echo --extra-index-url $(TORCH_CPU_INDEX))
# tox makes the missing environments of a list and reuses the rest
make_envs = FOOTPRINT_TORCH_INDEX="$(if $(filter %torch one-interpreter,$(1)),$(torch_index))" \
	$(TOX) run-parallel -e $(subst $(space),$(comma),$(strip $(1))) --notest --parallel-no-spinner -q

# Every environment: one per framework, the orchestrator's, the tests' (the FOOTPRINT_PYTHON test's among them).
envs: $(TOX)
	$(call make_envs,$(ENVS))

# Only the environments of the frameworks it runs: FRAMEWORKS=torch needs no other framework's wheels.
bench: $(TOX)
	$(call make_envs,$(call with_cuda,$(BENCH_FRAMEWORKS)) bench)
	.tox/bench/bin/python -m suites bench --suite "$(SUITE)" --device "$(DEVICE)" \
		--frameworks "$(FRAMEWORKS)" --models "$(MODELS)" --timeout "$(TIMEOUT)" --jobs "$(JOBS)" \
		--batches "$(BATCHES)" $(START)

# Every piece of evidence this machine can give, within LIMIT seconds a call; the next call goes on where it stopped.
# With FOOTPRINT_PYTHON (a prepared interpreter, docs/usage.md) no environment is made: that interpreter orchestrates.
ORCHESTRATOR := $(if $(FOOTPRINT_PYTHON),$(FOOTPRINT_PYTHON),.tox/bench/bin/python)
gpu-check: $(if $(FOOTPRINT_PYTHON),,$(TOX))
	$(if $(FOOTPRINT_PYTHON),,$(call make_envs,$(SUITE_ENVS) test))
	$(ORCHESTRATOR) -m suites check --device "$(DEVICE)" $(if $(LIMIT),--limit "$(LIMIT)" )--pieces "$(PIECES)" \
		$(if $(QUICK),--quick) $(if $(OUT),--out "$(OUT)") $(if $(WHEELS),--wheels "$(WHEELS)")

# The public conv nets through the suite: results/zoo-<commit>/ (docs/models.md). Its own env exports torchvision's
# and timm's nets: PyPI's torchvision for Linux is a CUDA build, so it joins the CPU torch without its dependencies,
# and so do timm, segmentation-models-pytorch, MONAI and Ultralytics (which ask for torchvision, or a second torch),
# with OpenCV's headless wheel, the one of Ultralytics's dependencies it imports that the env lacks.
zoo: $(TOX)
	$(call make_envs,$(SUITE_ENVS) zoo-torch zoo-keras)
	.tox/zoo-torch/bin/python -m pip install -q --no-deps torchvision==0.29.1 timm==1.0.31 \
		segmentation-models-pytorch==0.6.0 monai==1.6.1 ultralytics==8.4.0 opencv-python-headless==5.0.0.93
	.tox/zoo-keras/bin/python -m pip install -q --no-deps keras-hub==0.32.0
	.tox/bench/bin/python -m suites zoo $(if $(NETS),--nets "$(NETS)") $(if $(SEED),--seed "$(SEED)")

test: envs
	$(TOX) run -e test

clean:
	rm -rf .tox $(TOOLS)
