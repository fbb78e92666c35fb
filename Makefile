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

.PHONY: bench gpu-check zoo test envs clean

$(TOX):
	$(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/pip install --quiet tox==4.67.15

# Where nvidia-smi sees a GPU (and DEVICE is not cpu), the frameworks' CUDA builds are installed too.
GPU := $(shell [ "$(DEVICE)" != cpu ] && nvidia-smi -L >/dev/null 2>&1 && echo yes)
comma := ,
FRAMEWORK_ENVS := torch,jax,keras-tensorflow,keras-jax,keras-torch
ENVS := $(FRAMEWORK_ENVS),bench,test$(if $(GPU),$(comma)$(subst $(comma),-cuda$(comma),$(FRAMEWORK_ENVS))-cuda)

# One environment per framework plus the orchestrator's; tox makes the missing ones and reuses the rest.
envs: $(TOX)
	$(TOX) run-parallel -e $(ENVS) --notest --parallel-no-spinner -q

bench: envs
	.tox/bench/bin/python -m suites bench --suite "$(SUITE)" --device "$(DEVICE)" \
		--frameworks "$(FRAMEWORKS)" --models "$(MODELS)" --timeout "$(TIMEOUT)" --jobs "$(JOBS)" \
		--batches "$(BATCHES)" $(START)

# Every piece of evidence this machine can give, within LIMIT seconds a call; the next call goes on where it stopped.
# With FOOTPRINT_PYTHON (a prepared interpreter, docs/usage.md) no environment is made: that interpreter orchestrates.
ORCHESTRATOR := $(if $(FOOTPRINT_PYTHON),$(FOOTPRINT_PYTHON),.tox/bench/bin/python)
gpu-check: $(if $(FOOTPRINT_PYTHON),,envs)
	$(ORCHESTRATOR) -m suites check --device "$(DEVICE)" $(if $(LIMIT),--limit "$(LIMIT)" )--pieces "$(PIECES)" \
		$(if $(QUICK),--quick) $(if $(OUT),--out "$(OUT)") $(if $(WHEELS),--wheels "$(WHEELS)")

# The public conv nets through the suite: results/zoo-<commit>/ (docs/models.md). Its own env exports torchvision's
# nets: PyPI's torchvision for Linux is a CUDA build, so it joins the CPU torch without its dependencies.
zoo: envs
	$(TOX) run -e zoo-torch --notest -q
	.tox/zoo-torch/bin/python -m pip install -q --no-deps torchvision==0.29.1
	.tox/bench/bin/python -m suites zoo $(if $(NETS),--nets "$(NETS)") $(if $(SEED),--seed "$(SEED)")

test: envs
	$(TOX) run -e test

clean:
	rm -rf .tox $(TOOLS)
