# moonlm build. `make` builds the library and the CLI; `make test` runs every
# test the project has; `make run` builds, fetches the default model and
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

export MOONLM_TESTDATA ?= $(TESTDATA)
export MOONLM_LIBRARY  ?= $(abspath $(LIB))

.PHONY: all lib cli test test-go test-race test-variants test-c test-python test-node run model fuzz fuzz-all vet install clean bench bench-models

all: lib cli

lib: $(LIB)

$(LIB): $(GOFILES) include/moonlm.h $(wildcard capi/*.c capi/*.map)
	@mkdir -p $(BUILD)
	CGO_ENABLED=1 $(GO) build -buildmode=c-shared -trimpath -ldflags '$(LDFLAGS)' -o $(LIB) ./capi
	@rm -f $(BUILD)/libmoonlm.h

cli: $(CLI)

$(CLI): $(GOFILES)
	@mkdir -p $(BUILD)
	$(GO) build -trimpath -o $(CLI) ./cmd/moonlm

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }

test: all vet test-go test-race test-variants test-c test-python test-node

test-go: all
	$(GO) test -count=1 ./...

# The race detector over the packages whose concurrency matters.
test-race: all
	$(GO) test -count=1 -race -run 'Concurrent|Race|Parallel|Pool' ./engine/... ./capi/...

# The engine's reference tests again with each other kernel set forced, and
# the pure-Go build for another architecture (which has no assembly).
test-variants: all
	$(GO) test -count=1 -run 'Reference|Golden' ./engine/ -args -kernels=generic
	$(GO) test -count=1 -run 'Reference|Golden' ./engine/ -args -kernels=avx2
	GOARCH=arm64 CGO_ENABLED=0 $(GO) vet ./gguf/... ./kernels/... ./engine/... ./internal/...
	@mkdir -p $(BUILD)
	GOARCH=arm64 CGO_ENABLED=0 $(GO) test -c -o $(BUILD)/kernels.arm64.test ./kernels/
	GOARCH=arm64 CGO_ENABLED=0 $(GO) test -c -o $(BUILD)/gguf.arm64.test ./gguf/
	@# Run the arm64 (pure-Go) tests under qemu user emulation where it is
	@# installed; the test that re-executes itself needs binfmt, so it is skipped.
	@if command -v qemu-aarch64 >/dev/null; then \
	  (cd kernels && qemu-aarch64 ../$(BUILD)/kernels.arm64.test -test.skip TestSIMDEnvSelectsVariant) && \
	  (cd gguf && qemu-aarch64 ../$(BUILD)/gguf.arm64.test -test.short); \
	else echo "arm64 tests built, not run: qemu-aarch64 is not installed (apt-get install qemu-user)"; fi

test-c: all
	@if ls examples/c/*.c >/dev/null 2>&1; then $(MAKE) -C examples/c test LIBDIR=$(abspath $(BUILD)); else echo "no C examples"; fi

test-python: all
	@if [ -d bindings/python/tests ]; then cd bindings/python && python3 -m pytest -q tests; else echo "no python tests"; fi

test-node: all
	@if [ -f bindings/node/package.json ]; then cd bindings/node && npm test; else echo "no node tests"; fi

model:
	@scripts/fetch-model.sh

run: all
	@m=$$(scripts/fetch-model.sh) && $(CLI) generate -m "$$m" -p "$${PROMPT:-The three primary colors are}" -n $${N:-64}

# Synthetic 1B benchmark models (random weights) in ~/.cache/moonlm/bench, once.
bench-models: cli
	@scripts/bench-models.sh $(CLI)

# moonlm bench over SmolLM2 and the benchmark models; LLAMA_BENCH=path/to/llama-bench
# also runs llama.cpp interleaved with it and prints the ratios.
bench: cli bench-models
	@MOONLM_CLI=$(CLI) scripts/bench.sh

# `make fuzz` fuzzes the GGUF reader (the parser that meets hostile files);
# `make fuzz-all` also runs every other fuzz target, FUZZTIME each.
fuzz:
	$(GO) test ./gguf -run '^$$' -fuzz FuzzOpen -fuzztime $(FUZZTIME)

fuzz-all: fuzz
	$(GO) test ./engine/tokenizer -run '^$$' -fuzz FuzzEncode -fuzztime $(FUZZTIME)
	$(GO) test ./engine/tokenizer -run '^$$' -fuzz FuzzPreSplit -fuzztime $(FUZZTIME)
	$(GO) test ./engine/chat -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZTIME)
	$(GO) test ./engine/chat -run '^$$' -fuzz FuzzJSON -fuzztime $(FUZZTIME)
	$(GO) test ./engine/sample -run '^$$' -fuzz FuzzSample -fuzztime $(FUZZTIME)
	$(GO) test ./internal/packcache -run '^$$' -fuzz FuzzGet -fuzztime $(FUZZTIME)

install: all
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 0755 $(LIB) $(DESTDIR)$(PREFIX)/lib/libmoonlm.so.0
	ln -sf libmoonlm.so.0 $(DESTDIR)$(PREFIX)/lib/libmoonlm.so
	install -m 0644 include/moonlm.h $(DESTDIR)$(PREFIX)/include/moonlm.h
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' moonlm.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/moonlm.pc

clean:
	rm -rf $(BUILD)
