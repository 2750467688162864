# moonlm build. `make` builds the library and the CLI; `make test` runs every
# test the project has (it sets up what they need: a Python venv, the npm
# packages, the models); `make run` builds, fetches the default model and
# generates text from it.

GO        ?= go
BUILD     ?= build
LIB       := $(BUILD)/libmoonlm.so
CLI       := $(BUILD)/moonlm
TESTDATA  ?= $(abspath ../shared/testdata)
FUZZTIME  ?= 10m
PREFIX    ?= /usr/local
VERSION   := 0.1.0
GOFILES   := $(shell find . -name '*.go' -not -path './bindings/*' 2>/dev/null) go.mod
LDFLAGS   := -s -w -extldflags=-Wl,-soname,libmoonlm.so.0,--version-script=$(abspath capi/moonlm.map)
# The go build arguments of every build of the library (-trimpath, the
# packages built without inlining): capi/buildflags, which setup.py and the
# tests that build the library read too.
LIBFLAGS  := $(strip $(shell sed -e 's/^[[:space:]]*\#.*//' capi/buildflags))
SHELL     := /bin/bash

# Everything `make` downloads, builds or caches stays under build/, never in
# the user's home: the models (make run, make model, the tests), the
# packed-weight cache, the benchmark models, pip's and npm's caches, the
# Python virtual environment the tests use. Each can be pointed elsewhere
# from the environment.
ABSBUILD  := $(abspath $(BUILD))
RESULTS   := $(ABSBUILD)/test-results
VENV      := $(ABSBUILD)/venv
PYTHON    := $(VENV)/bin/python
TESTSUM   := $(BUILD)/testsum
GOTEST    := $(GO) test -json -count=1 -timeout 20m
export MOONLM_TESTDATA ?= $(TESTDATA)
export MOONLM_LIBRARY  ?= $(abspath $(LIB))
export MOONLM_MODELS   ?= $(ABSBUILD)/models
export MOONLM_BENCH_DIR ?= $(ABSBUILD)/bench
export MOONLM_PACKED_CACHE_DIR ?= $(ABSBUILD)/packed-cache
export PIP_CACHE_DIR   ?= $(ABSBUILD)/pip-cache
# The synthetic models the engine's generators write (make synth-models),
# and llama.cpp's test vocabularies, templates and grammars
# (make llamacpp-data), which the tests read from there.
export MOONLM_SYNTH_DIR ?= $(ABSBUILD)/synth
export MOONLM_LLAMACPP_DIR ?= $(ABSBUILD)/llamacpp
export npm_config_cache ?= $(ABSBUILD)/npm-cache
export npm_config_update_notifier ?= false

# Go's build cache and module cache, and its telemetry, stay under build/ as
# well, for the go commands of the recipes and of the tests that run go
# (exported, so the Python, Node and package tests inherit them). The
# module cache is written read-write (-modcacherw), so that `make clean`
# can remove it. The go command keeps its telemetry (counters, and the
# mode file `go telemetry off` writes) under os.UserConfigDir()/go/telemetry
# and has no variable of its own for it (GOTELEMETRYDIR only reports it),
# so XDG_CONFIG_HOME points into build/, where telemetry is set off; GOENV
# keeps reading the user's go settings (GOPROXY, GOFLAGS, ...) from where
# they are, and PIP_CONFIG_FILE pip's user configuration.
USERCONFIG := $(or $(XDG_CONFIG_HOME),$(HOME)/.config)
export GOENV ?= $(USERCONFIG)/go/env
ifneq ($(wildcard $(USERCONFIG)/pip/pip.conf),)
export PIP_CONFIG_FILE ?= $(USERCONFIG)/pip/pip.conf
endif
export XDG_CONFIG_HOME := $(ABSBUILD)/config
export GOCACHE    ?= $(ABSBUILD)/go-cache
export GOMODCACHE ?= $(ABSBUILD)/go-mod
# $(shell) gets make's exports only from GNU make 4.4 on: GOSHELL is go
# for it.
GOSHELL := XDG_CONFIG_HOME='$(XDG_CONFIG_HOME)' GOENV='$(GOENV)' GOCACHE='$(GOCACHE)' GOMODCACHE='$(GOMODCACHE)' $(GO)
ifeq ($(wildcard $(XDG_CONFIG_HOME)/go/telemetry/mode),)
$(shell $(GOSHELL) telemetry off >/dev/null 2>&1)
endif
export GOFLAGS := $(strip $(filter-out -modcacherw,$(shell $(GOSHELL) env GOFLAGS 2>/dev/null)) -modcacherw)

.PHONY: all lib cli test test-go test-race test-variants test-c test-python test-node test-snippets \
	venv node-deps models synth-models llamacpp-data run model fuzz fuzz-all vet install clean distclean bench bench-models bench-serve

all: lib cli

lib: $(LIB)

# build/libmoonlm.so is for this machine, and is linked with DT_RELR
# (ld -z pack-relative-relocs) when this machine's C toolchain and C
# library have it (glibc 2.36 or newer): its ~16,000 relative relocations
# (the pointers in Go's type descriptors and tables) become a bitmap of a
# few KB instead of 24 bytes each, 380 KB less. The linker then records a
# need for GLIBC_ABI_DT_RELR, so an older glibc refuses the file with a
# message rather than loading it wrong. What is built to be copied to other
# machines is linked without it and loads on glibc 2.34: LIB_PORTABLE (the
# x86_64 wheel, the npm tarball), lib-arm64, the sdist's build (setup.py).
# RELR is ",-z,pack-relative-relocs" (appended to LDFLAGS' -extldflags) or
# empty; it is worked out only when the library is built.
CGO_CC = $(shell $(GOSHELL) env CC)
RELR = $(shell d=$$(mktemp -d) && printf 'void abort(void);\nstatic int x;\nint *p = &x;\nvoid f(void) { abort(); }\n' >$$d/t.c && \
  $(CGO_CC) -shared -fPIC -Wl,-z,pack-relative-relocs -o $$d/t.so $$d/t.c >/dev/null 2>&1 && \
  readelf -V $$d/t.so 2>/dev/null | grep -q GLIBC_ABI_DT_RELR && echo ,-z,pack-relative-relocs; rm -rf $$d)

$(LIB): $(GOFILES) include/moonlm.h $(wildcard capi/*.c capi/*.map) capi/buildflags
	@mkdir -p $(BUILD)
	CGO_ENABLED=1 $(GO) build -buildmode=c-shared $(LIBFLAGS) -ldflags '$(LDFLAGS)$(RELR)' -o $(LIB) ./capi
	@rm -f $(BUILD)/libmoonlm.h

cli: $(CLI)

$(CLI): $(GOFILES)
	@mkdir -p $(BUILD)
	$(GO) build -trimpath -o $(CLI) ./cmd/moonlm

$(TESTSUM): internal/testsum/main.go
	@mkdir -p $(BUILD)
	$(GO) build -o $@ ./internal/testsum

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }

# The Python virtual environment the tests use, with
# bindings/python/requirements-test.txt installed; made again only when that
# file changes (its copy in the venv is the stamp).
venv:
	@if ! cmp -s bindings/python/requirements-test.txt $(VENV)/requirements-test.txt || ! $(PYTHON) -c '' 2>/dev/null; then \
	  echo "== Python virtual environment $(VENV) (bindings/python/requirements-test.txt)"; \
	  rm -rf $(VENV) && \
	  { python3 -m venv $(VENV) || { echo "python3 -m venv failed: install the venv module (Debian: apt-get install python3-venv)"; exit 1; }; } && \
	  $(PYTHON) -m pip install --quiet --disable-pip-version-check -r bindings/python/requirements-test.txt && \
	  cp bindings/python/requirements-test.txt $(VENV)/requirements-test.txt; \
	fi

# bindings/node/node_modules from the lock file, again when it changes.
node-deps:
	@if [ -f bindings/node/package.json ] && ! cat bindings/node/package.json bindings/node/package-lock.json | cmp -s - bindings/node/node_modules/.moonlm-stamp; then \
	  echo "== npm ci in bindings/node"; \
	  (cd bindings/node && npm ci --no-audit --no-fund --loglevel=error) && \
	  cat bindings/node/package.json bindings/node/package-lock.json > bindings/node/node_modules/.moonlm-stamp; \
	fi

# The default models the tests of real models use (in $(MOONLM_MODELS)).
models: venv
	@PYTHON=$(PYTHON) scripts/fetch-model.sh smollm2 >/dev/null
	@PYTHON=$(PYTHON) scripts/fetch-model.sh gemma3 >/dev/null

# llama.cpp's test files that are not ours to commit (the Gemma 4, Qwen 3.5
# and XLM-RoBERTa tokenizer vocabularies and vectors, the Qwen 3.5 chat
# template, the sample grammars), from llama-cpp-python's sdist on PyPI into
# $(MOONLM_LLAMACPP_DIR) (build/llamacpp), once.
llamacpp-data: venv
	@PYTHON=$(PYTHON) scripts/fetch-llamacpp-data.sh >/dev/null

# The synthetic models (no .gguf is committed): the engine's generators
# write each into $(MOONLM_SYNTH_DIR) (build/synth), checked against the
# sha256 its references were made from, for the tests of the other packages,
# the bindings and the README examples (the engine's own tests make them
# as they need them). XLM-R's needs llama.cpp's vocabulary.
synth-models: llamacpp-data
	@mkdir -p $(BUILD); $(GO) test -count=1 -run '^TestWriteSynthModels$$' ./engine/ >$(BUILD)/synth-models.log 2>&1 || \
	  { cat $(BUILD)/synth-models.log; echo "make synth-models: the generators failed"; exit 1; }

# `make test` runs every part, even after one fails, prints each part's
# summary again at the end, and fails if any part failed.
TEST_PARTS := go race variants c python node snippets packages web

test: all vet $(TESTSUM) venv node-deps models llamacpp-data synth-models
	@rm -rf $(RESULTS); mkdir -p $(RESULTS); fail=0; start=$$(date +%s); \
	for p in $(TEST_PARTS); do \
	  echo; echo "== make test-$$p"; \
	  $(MAKE) --no-print-directory test-$$p || { fail=1; [ -s $(RESULTS)/$$p.txt ] || echo "$$p: FAILED before its tests ran (see the log above)" > $(RESULTS)/$$p.txt; }; \
	done; \
	echo; echo "== make test: summary ($$(( ($$(date +%s) - start) / 60 )) min $$(( ($$(date +%s) - start) % 60 )) s)"; \
	for p in $(TEST_PARTS); do cat $(RESULTS)/$$p.txt; done; \
	if [ $$fail = 0 ]; then echo "make test: all parts passed"; else echo "make test: FAILED"; fi; \
	exit $$fail

# Go's python3 cross-checks (gguf against gguf-py) use the venv's Python.
test-go: all $(TESTSUM) venv models llamacpp-data synth-models
	@set -o pipefail; PATH=$(VENV)/bin:$$PATH $(GOTEST) $$($(GO) list ./... | grep -v '/internal/docsnippets\|/internal/packagetest') 2>&1 | \
	  $(TESTSUM) -part Go -record $(RESULTS)/go.txt

# The race detector over the packages whose concurrency matters.
test-race: all $(TESTSUM) models synth-models
	@set -o pipefail; $(GOTEST) -race -run 'Concurrent|Race|Parallel|Pool' ./engine/... ./capi/... 2>&1 | \
	  $(TESTSUM) -part Race -record $(RESULTS)/race.txt

# The engine's reference tests again with each other kernel set forced, and
# the pure-Go build for another architecture (which has no assembly), run
# under qemu user emulation where it is installed.
test-variants: all $(TESTSUM) models synth-models
	@mkdir -p $(BUILD); set -o pipefail; skip=(); \
	if ! command -v qemu-aarch64 >/dev/null; then skip=(-skip "arm64 kernels and gguf tests=built, not run: qemu-aarch64 is not installed (apt-get install qemu-user)"); fi; \
	{ st=0; \
	  for k in generic avx2; do \
	    $(GOTEST) -run 'Reference|Golden' ./engine/ -args -kernels=$$k | sed -u "s|\"Package\":\"\([^\"]*\)\"|\"Package\":\"\1 [$$k]\"|" || st=1; \
	  done; \
	  GOARCH=arm64 CGO_ENABLED=0 $(GO) vet ./gguf/... ./kernels/... ./engine/... ./internal/... || st=1; \
	  GOARCH=arm64 CGO_ENABLED=0 $(GO) test -c -o $(BUILD)/kernels.arm64.test ./kernels/ || st=1; \
	  GOARCH=arm64 CGO_ENABLED=0 $(GO) test -c -o $(BUILD)/gguf.arm64.test ./gguf/ || st=1; \
	  if command -v qemu-aarch64 >/dev/null; then \
	    (cd kernels && $(GO) tool test2json -p arm64/kernels qemu-aarch64 ../$(BUILD)/kernels.arm64.test -test.v=test2json) || st=1; \
	    (cd gguf && $(GO) tool test2json -p arm64/gguf qemu-aarch64 ../$(BUILD)/gguf.arm64.test -test.v=test2json -test.short) || st=1; \
	  fi; exit $$st; } 2>&1 | $(TESTSUM) -part Variants -record $(RESULTS)/variants.txt "$${skip[@]}"

# The C examples; their Makefile prints one line per program it checked.
test-c: all
	@mkdir -p $(RESULTS); set -o pipefail; \
	if ! ls examples/c/*.c >/dev/null 2>&1; then printf 'C:        ok     0 passed, 0 failed, 0 skipped (no C examples)\n' | tee $(RESULTS)/c.txt; exit 0; fi; \
	$(MAKE) --no-print-directory -C examples/c test LIBDIR=$(ABSBUILD) 2>&1 | tee $(RESULTS)/c.log; st=$$?; \
	n=$$(grep -c '^examples/c: [a-z]*: \|^examples/c: [a-z]* ran' $(RESULTS)/c.log); \
	if [ $$st != 0 ]; then printf 'C:        FAILED %d passed, 1 failed, 0 skipped (see the log above)\n' $$n; \
	elif grep -q 'SKIP' $(RESULTS)/c.log; then printf 'C:        ok     0 passed, 0 failed, 1 skipped\n    skipped: %s\n' "$$(grep -m1 SKIP $(RESULTS)/c.log | sed 's/.*SKIP *//')"; \
	else printf 'C:        ok     %d passed, 0 failed, 0 skipped\n' $$n; fi | tee $(RESULTS)/c.txt; \
	exit $$st

test-python: all $(TESTSUM) venv synth-models
	@mkdir -p $(RESULTS); \
	if [ ! -d bindings/python/tests ]; then printf 'Python:   ok     0 passed, 0 failed, 0 skipped (no tests)\n' | tee $(RESULTS)/python.txt; exit 0; fi; \
	(cd bindings/python && $(PYTHON) -m pytest -q -rs -p no:cacheprovider --junitxml=$(RESULTS)/python.xml tests); st=$$?; \
	$(TESTSUM) -part Python -junit $(RESULTS)/python.xml -record $(RESULTS)/python.txt || st=1; \
	exit $$st

test-node: all $(TESTSUM) node-deps synth-models
	@mkdir -p $(RESULTS); \
	if [ ! -f bindings/node/package.json ]; then printf 'Node:     ok     0 passed, 0 failed, 0 skipped (no tests)\n' | tee $(RESULTS)/node.txt; exit 0; fi; \
	(cd bindings/node && node --test --test-reporter=dot --test-reporter-destination=stdout \
	  --test-reporter=junit --test-reporter-destination=$(RESULTS)/node.xml test/*.test.js); st=$$?; \
	$(TESTSUM) -part Node -junit $(RESULTS)/node.xml -record $(RESULTS)/node.txt || st=1; \
	exit $$st

# Every C, Python and JavaScript block of README.md and the bindings'
# READMEs, run as documented (internal/docsnippets says how).
test-snippets: all $(TESTSUM) models synth-models
	@$(MAKE) --no-print-directory lib-arm64 || echo "build/linux-arm64/libmoonlm.so could not be built: the npm tarball check skips linux-arm64"
	@set -o pipefail; MOONLM_SNIPPETS=1 $(GOTEST) ./internal/docsnippets 2>&1 | \
	  $(TESTSUM) -part README -record $(RESULTS)/snippets.txt

# ---- The engine in the browser (build/web) --------------------------------
# `make web`: the engine compiled to WebAssembly (cmd/moonlm-wasm) with Go's
# wasm_exec.js and the page of examples/web; any static file server serves
# build/web. `make test-web` loads models into that page in headless
# Chromium (Debian's package, apt-get installed when missing and possible)
# driven by Playwright from PyPI (build/web-venv, using the system
# Chromium); it skips with the reason when neither can be had. It also runs
# cmd/moonlm-wasm's Go tests under Node. It does not depend on `models`
# (which remakes build/venv): the SmolLM2 test skips when the model is absent.
WEB       := $(BUILD)/web
WEBVENV   := $(ABSBUILD)/web-venv
GOROOTDIR := $(shell $(GOSHELL) env GOROOT)
WASM_EXEC := $(firstword $(wildcard $(GOROOTDIR)/lib/wasm/wasm_exec.js $(GOROOTDIR)/misc/wasm/wasm_exec.js))

.PHONY: web test-web web-venv

web: $(WEB)/moonlm.wasm $(addprefix $(WEB)/,$(notdir $(wildcard examples/web/*.js examples/web/*.html))) $(WEB)/wasm_exec.js

$(WEB)/moonlm.wasm: $(GOFILES)
	@mkdir -p $(WEB)
	GOOS=js GOARCH=wasm CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $@ ./cmd/moonlm-wasm

$(WEB)/%: examples/web/%
	@mkdir -p $(WEB)
	cp $< $@

$(WEB)/wasm_exec.js: $(WASM_EXEC)
	@mkdir -p $(WEB)
	@test -n "$(WASM_EXEC)" || { echo "wasm_exec.js not found in $$($(GO) env GOROOT)"; exit 1; }
	cp $< $@

web-venv:
	@if ! cmp -s examples/web/requirements-test.txt $(WEBVENV)/requirements-test.txt || ! $(WEBVENV)/bin/python -c '' 2>/dev/null; then \
	  echo "== Python virtual environment $(WEBVENV) (examples/web/requirements-test.txt)"; \
	  rm -rf $(WEBVENV) && python3 -m venv $(WEBVENV) && \
	  $(WEBVENV)/bin/python -m pip install --quiet --disable-pip-version-check -r examples/web/requirements-test.txt && \
	  cp examples/web/requirements-test.txt $(WEBVENV)/requirements-test.txt; \
	fi

test-web: web cli $(TESTSUM)
	@mkdir -p $(RESULTS); \
	if ! command -v chromium >/dev/null && [ -n "$$CI$$MOONLM_INSTALL" ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "== apt-get install chromium"; \
	  { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; } >$(RESULTS)/web-apt.log 2>&1 || echo "apt-get install chromium failed (see $(RESULTS)/web-apt.log)"; \
	fi; \
	$(MAKE) --no-print-directory web-venv || echo "the Playwright venv could not be made: the browser tests skip"; \
	py=$(WEBVENV)/bin/python; $$py -c 'import playwright, pytest' 2>/dev/null || py=$(PYTHON); \
	MOONLM_WEB_DIR=$(abspath $(WEB)) MOONLM_CLI=$(abspath $(CLI)) \
	  $$py -m pytest -q -rs -p no:cacheprovider --junitxml=$(RESULTS)/web.xml examples/web/test_web.py; st=$$?; \
	$(TESTSUM) -part Web -junit $(RESULTS)/web.xml -record $(RESULTS)/web.txt || st=1; \
	exit $$st

# ---- Packages that install without a toolchain (into build/dist) ---------
# `make wheel`: one manylinux wheel per CPU (x86_64 and aarch64, the aarch64
# library cross-compiled with Debian's gcc-aarch64-linux-gnu), each bundling
# libmoonlm.so and checked by auditwheel, plus an sdist that builds the
# library with Go. `make npm-pack`: the npm tarball with the libraries of
# both CPUs inside. The tools come from apt-get (only when missing) and
# PyPI (into build/pkg-venv); the build machine is x86_64 Linux.
PKGVENV   := $(ABSBUILD)/pkg-venv
DIST      := $(ABSBUILD)/dist
LIB_ARM64 := $(BUILD)/linux-arm64/libmoonlm.so
# The x86_64 library the packages carry: build/libmoonlm.so's code, linked
# without DT_RELR (see lib), so that it loads on glibc 2.34.
LIB_PORTABLE := $(BUILD)/linux-x64/libmoonlm.so

.PHONY: dll lib-arm64 lib-portable pkg-venv wheel npm-pack dist test-packages

lib-arm64: $(LIB_ARM64)

$(LIB_ARM64): $(GOFILES) include/moonlm.h $(wildcard capi/*.c capi/*.map) capi/buildflags
	@scripts/need-apt.sh aarch64-linux-gnu-gcc gcc-aarch64-linux-gnu libc6-dev-arm64-cross
	@mkdir -p $(dir $@)
	CGO_ENABLED=1 GOARCH=arm64 CC=aarch64-linux-gnu-gcc $(GO) build -buildmode=c-shared $(LIBFLAGS) -ldflags '$(LDFLAGS)' -o $@ ./capi
	@rm -f $(basename $@).h

lib-portable: $(LIB_PORTABLE)

$(LIB_PORTABLE): $(GOFILES) include/moonlm.h $(wildcard capi/*.c capi/*.map) capi/buildflags
	@mkdir -p $(dir $@)
	CGO_ENABLED=1 $(GO) build -buildmode=c-shared $(LIBFLAGS) -ldflags '$(LDFLAGS)' -o $@ ./capi
	@rm -f $(basename $@).h

# `make dll`: build/windows-amd64/moonlm.dll with mingw-w64 (installed with
# apt-get only when missing), and its import library moonlm.dll.a for
# mingw's linker. moonlm.map is a GNU ld version script for ELF: a DLL exports
# what include/moonlm.h marks dllexport (MOONLM_BUILDING_DLL, set in
# capi/main.go) plus the Go side's .def, so no version script here. That .def
# also exports the internal moonlmgo_* functions (ld has no way to hide what
# Go lists there); they are not in include/moonlm.h and not part of the API.
DLL := $(BUILD)/windows-amd64/moonlm.dll

dll: $(DLL)

$(DLL): $(GOFILES) include/moonlm.h $(wildcard capi/*.c) capi/buildflags
	@scripts/need-apt.sh x86_64-w64-mingw32-gcc gcc-mingw-w64-x86-64
	@mkdir -p $(dir $@)
	CGO_ENABLED=1 GOOS=windows GOARCH=amd64 CC=x86_64-w64-mingw32-gcc $(GO) build -buildmode=c-shared $(LIBFLAGS) \
	  -ldflags '-s -w -extldflags=-Wl,--out-implib,$(abspath $@).a' -o $@ ./capi
	@rm -f $(basename $@).h

pkg-venv:
	@if ! cmp -s scripts/requirements-package.txt $(PKGVENV)/requirements-package.txt || ! $(PKGVENV)/bin/python -c '' 2>/dev/null; then \
	  echo "== Python virtual environment $(PKGVENV) (scripts/requirements-package.txt)"; \
	  rm -rf $(PKGVENV) && python3 -m venv $(PKGVENV) && \
	  $(PKGVENV)/bin/python -m pip install --quiet --disable-pip-version-check -r scripts/requirements-package.txt && \
	  cp scripts/requirements-package.txt $(PKGVENV)/requirements-package.txt; \
	fi

wheel: $(LIB_PORTABLE) $(LIB_ARM64) pkg-venv
	@test "$$(uname -m)" = x86_64 || { echo "make wheel: the build machine must be x86_64 Linux"; exit 1; }
	@PYTHON=$(PKGVENV)/bin/python scripts/wheel.sh $(DIST) x86_64=$(LIB_PORTABLE) aarch64=$(LIB_ARM64)

npm-pack: $(LIB_PORTABLE) $(LIB_ARM64)
	@mkdir -p $(DIST); rm -f $(DIST)/moonlm-*.tgz
	@cd bindings/node && MOONLM_PACK_ALL=1 MOONLM_LIBRARY_LINUX_X64=$(abspath $(LIB_PORTABLE)) npm pack --silent --pack-destination $(DIST) >/dev/null
	@echo "npm: $$(ls $(DIST)/moonlm-*.tgz)"

dist: wheel npm-pack

# The packages as a user gets them: the x86_64 wheel in a fresh venv with no
# Go on PATH, the sdist built with Go, the aarch64 library under qemu.
# Without the cross compiler, the x86_64 wheel is still built and tested
# (the aarch64 tests then skip, saying why).
test-packages: $(TESTSUM) lib cli $(LIB_PORTABLE)
	@arm=aarch64=$(LIB_ARM64); $(MAKE) --no-print-directory lib-arm64 || { arm=; rm -f $(LIB_ARM64); \
	  echo "the aarch64 library could not be built: its tests will be skipped"; }; \
	$(MAKE) --no-print-directory pkg-venv && PYTHON=$(PKGVENV)/bin/python scripts/wheel.sh $(DIST) x86_64=$(LIB_PORTABLE) $$arm || \
	  echo "building the packages failed: the package tests will say so"
	@$(MAKE) --no-print-directory dll || { rm -f $(DLL); echo "the Windows DLL could not be built: its test will be skipped"; }
	@scripts/need-apt.sh qemu-aarch64 qemu-user >/dev/null 2>&1 || true
	@set -o pipefail; MOONLM_DIST=$(DIST) MOONLM_LIB_ARM64=$(abspath $(LIB_ARM64)) MOONLM_DLL=$(abspath $(DLL)) PKG_PYTHON=$(PKGVENV)/bin/python \
	  $(GOTEST) ./internal/packagetest 2>&1 | $(TESTSUM) -part Packages -record $(RESULTS)/packages.txt

# The default model, into $(MOONLM_MODELS) (build/models); prints its path.
model:
	@scripts/fetch-model.sh

# Greedy by default, so the first run is reproducible; TEMP=0.8 samples.
run: all
	@m=$$(scripts/fetch-model.sh) && echo "model: $$m" >&2 && \
	  $(CLI) generate -m "$$m" -p "$${PROMPT:-The three primary colors are}" -n $${N:-64} --temp $${TEMP:-0}

# Synthetic 1B benchmark models (random weights) in $(MOONLM_BENCH_DIR), once.
bench-models: cli
	@scripts/bench-models.sh $(CLI)

# moonlm bench over SmolLM2 and the benchmark models, interleaved with the
# llama-bench builds named by LLAMA_BENCH and IK_BENCH (either optional):
# writes $(MOONLM_BENCH_DIR)/results.json and results.svg (scripts/bench-page.py;
# QUICK=1 for a run of minutes, OUT=dir to write elsewhere).
bench: cli bench-models
	@MOONLM_CLI=$(CLI) scripts/bench-page.py

# Load test of moonlm serve on loopback (scripts/bench-serve.sh says the
# settings); LLAMA_SERVER=path/to/llama-server runs llama.cpp's beside it.
bench-serve: cli bench-models
	@MOONLM_CLI=$(CLI) scripts/bench-serve.sh

# `make fuzz` fuzzes the GGUF reader (the parser that meets hostile files);
# `make fuzz-all` also runs every other fuzz target, FUZZTIME each.
fuzz:
	$(GO) test ./gguf -run '^$$' -fuzz FuzzOpen -fuzztime $(FUZZTIME)

fuzz-all: fuzz
	$(GO) test ./engine/tokenizer -run '^$$' -fuzz FuzzEncode -fuzztime $(FUZZTIME)
	$(GO) test ./engine/tokenizer -run '^$$' -fuzz FuzzPreSplit -fuzztime $(FUZZTIME)
	$(GO) test ./engine/chat -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZTIME)
	$(GO) test ./engine/chat -run '^$$' -fuzz FuzzJSON -fuzztime $(FUZZTIME)
	$(GO) test ./engine/chat -run '^$$' -fuzz FuzzToolCalls -fuzztime $(FUZZTIME)
	$(GO) test ./engine/chat -run '^$$' -fuzz FuzzMessagesJSON -fuzztime $(FUZZTIME)
	$(GO) test ./engine/sample -run '^$$' -fuzz FuzzSample -fuzztime $(FUZZTIME)
	$(GO) test ./engine -run '^$$' -fuzz FuzzOpenMetadata -fuzztime $(FUZZTIME)
	$(GO) test ./internal/packcache -run '^$$' -fuzz FuzzGet -fuzztime $(FUZZTIME)

install: all
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 0755 $(LIB) $(DESTDIR)$(PREFIX)/lib/libmoonlm.so.0
	ln -sf libmoonlm.so.0 $(DESTDIR)$(PREFIX)/lib/libmoonlm.so
	install -m 0644 include/moonlm.h $(DESTDIR)$(PREFIX)/include/moonlm.h
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' moonlm.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/moonlm.pc

# `make clean` keeps the fetched models (build/models); `make distclean`
# removes them too.
# Modules fetched before -modcacherw are read-only: chmod first.
clean:
	@chmod -R u+w $(ABSBUILD)/go-mod 2>/dev/null || true
	find $(BUILD) -mindepth 1 -maxdepth 1 ! -name models -exec rm -rf {} + 2>/dev/null || true

distclean:
	@chmod -R u+w $(ABSBUILD)/go-mod 2>/dev/null || true
	rm -rf $(BUILD)
