# make bench [SUITE=default] [DEVICE=auto|cpu|cuda] [FRAMEWORKS=torch,keras-jax] [MODELS=keras-small] [TIMEOUT=600]
#            [START=--resume|--fresh] [JOBS=2] [BATCHES=10,20,30]
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

.PHONY: bench test envs clean

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

test: envs
	$(TOX) run -e test

clean:
	rm -rf .tox $(TOOLS)
