# Thin wrapper over the CMake presets. The real build is CMakeLists.txt.
PRESET ?= release
JOBS   ?= $(shell nproc)
WERROR ?= OFF
CMAKE_FLAGS ?=
ARGS   ?=

.PHONY: all build run test asan bench fuzz format clean

all: build

build/$(PRESET)/build.ninja: CMakeLists.txt CMakePresets.json
	cmake --preset $(PRESET) -DVIGIL_WERROR=$(WERROR) $(CMAKE_FLAGS) >/dev/null

build: build/$(PRESET)/build.ninja
	cmake --build --preset $(PRESET) -j $(JOBS)

# Build, then start the server in the foreground on the embedded default configuration.
run: build/$(PRESET)/build.ninja
	cmake --build --preset $(PRESET) -j $(JOBS) --target vigil
	./build/$(PRESET)/vigil $(ARGS)

# Build, then run the whole suite.
test: build
	ctest --preset $(PRESET) $(ARGS)

# The suite under AddressSanitizer + UndefinedBehaviorSanitizer: the asan
# build's unit and fault tests, then the release build's integration tests
# (drivers of the programs they start) against the asan build's vigil,
# examples and support programs, so the drivers are compiled once.
asan:
	$(MAKE) build PRESET=release
	$(MAKE) build PRESET=asan
	ctest --preset asan $(ARGS)
	VIGIL_TEST_BUILD_DIR=$(CURDIR)/build/asan ctest --preset release -L '^integration$$' $(ARGS)

bench: build
	@for b in build/$(PRESET)/bench_*; do echo "== $$b"; $$b $(ARGS) || exit 1; done

# Builds the libFuzzer targets with clang and runs each for a bounded time.
FUZZ_SECONDS ?= 30
fuzz:
	cmake --preset fuzz >/dev/null
	cmake --build --preset fuzz -j $(JOBS)
	@for f in build/fuzz/*_fuzz; do \
	  name=$$(basename $$f); corpus=build/fuzz/corpus/$$name; mkdir -p $$corpus; \
	  seeds=tests/fuzz/corpus/$$name; [ -d $$seeds ] || seeds=; \
	  echo "== $$name ($(FUZZ_SECONDS)s)"; \
	  $$f -max_total_time=$(FUZZ_SECONDS) -timeout=5 -rss_limit_mb=2048 -print_final_stats=1 $$corpus $$seeds || exit 1; \
	done

format:
	clang-format -i $$(git ls-files '*.cc' '*.h')

clean:
	rm -rf build
