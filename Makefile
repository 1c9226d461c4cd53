# hlocache: two commands do all the set-up on a fresh Debian machine.
#   make serve   install what is missing, build, run the server on ./var/hlocache
#   make test    install what is missing, build, run every test (then again under ASan/UBSan,
#                with a bounded fuzzing run)
SHELL := /bin/bash
BUILD ?= build
SAN_BUILD ?= build-asan
FUZZ_SECONDS ?= 60
READER_FUZZ_SECONDS ?= 20
SERVE_DIR ?= var/hlocache
LISTEN ?= 127.0.0.1:7070

APT_PACKAGES := cmake ninja-build g++ clang libclang-rt-14-dev lld pkg-config ccache \
  libleveldb-dev libsnappy-dev libsqlite3-dev libxxhash-dev libcpp-httplib-dev libcurl4-openssl-dev \
  libcli11-dev nlohmann-json3-dev libzstd-dev libgtest-dev libgmock-dev libssl-dev openssl python3 python3-yaml iproute2 \
  fuse3 libfuse3-dev libopenblas0 libdnnl-dev
# What only the tests use: a Ceph cluster (monitor, OSDs, RADOS Gateway) for the bucket tests.
TEST_APT_PACKAGES := ceph-mon ceph-osd radosgw ceph-common curl

.PHONY: all deps test-deps build test unit sanitize serve bench format clean

all: build

deps test-deps: PACKAGES = $(APT_PACKAGES)
test-deps: PACKAGES += $(TEST_APT_PACKAGES)
deps test-deps:
	@missing=""; \
	for p in $(PACKAGES); do \
	  dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  SUDO=""; [ "$$(id -u)" -eq 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing; \
	fi

# Line tables (-g1) are all the debug information a backtrace or a sanitizer report uses (file
# and line in every frame), and build a third faster than full -g.
RELWITHDEBINFO_FLAGS := -O2 -g1 -DNDEBUG

build: deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$(RELWITHDEBINFO_FLAGS)"
	cmake --build $(BUILD)

# One test more than there are cores: many tests spend their time waiting (a Ceph cluster
# starting, a client trickling its headers, a worker timing out), and one more test keeps every
# core busy meanwhile. Measured on 2 cores: the plain suite in 303 s at -j3 against 512 s at -j2,
# the cores idle 1% of the run.
CTEST_JOBS ?= $(shell echo $$(( $$(nproc) + 1 )))

unit: test-deps build
	ctest --test-dir $(BUILD) --output-on-failure -j$(CTEST_JOBS)

# The same suite under AddressSanitizer + UndefinedBehaviorSanitizer (clang), plus the libFuzzer
# target for a bounded time.
# LeakSanitizer's exit-time check in clang 14's runtime can crash walking the dynamic TLS of a
# dlopen'ed library ("Tracer caught signal 11", google/sanitizers issue 1267): it did once, after
# a test that ran OpenBLAS, which executables' f32 dots load. Leaks are still checked; dynamic
# TLS blocks, which hold none of ours, are no longer tracked.
SAN_ASAN_OPTIONS := detect_leaks=1:intercept_tls_get_addr=0
sanitize: test-deps
	CC=clang CXX=clang++ cmake -S . -B $(SAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$(RELWITHDEBINFO_FLAGS)" \
	  -DHLOCACHE_SANITIZE=ON -DHLOCACHE_FUZZ=ON -DHLOCACHE_BENCH=OFF \
	  -DHLOCACHE_FUZZ_SECONDS=$(FUZZ_SECONDS) -DHLOCACHE_READER_FUZZ_SECONDS=$(READER_FUZZ_SECONDS)
	cmake --build $(SAN_BUILD)
	ASAN_OPTIONS=$(SAN_ASAN_OPTIONS) UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --test-dir $(SAN_BUILD) --output-on-failure -j$(CTEST_JOBS)

test: unit sanitize

serve: build
	mkdir -p $(SERVE_DIR)
	./$(BUILD)/hlocache serve --dir $(SERVE_DIR) --listen $(LISTEN)

# The peers the benchmarks measure side by side.
BENCH_PACKAGES := nginx redis-server redis-tools wrk libopenblas0 python3-numpy python3-torch

bench: build
	@missing=""; \
	for p in $(BENCH_PACKAGES); do \
	  dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  SUDO=""; [ "$$(id -u)" -eq 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing; \
	fi
	./$(BUILD)/bench/key_bench
	./$(BUILD)/bench/store_bench
	./$(BUILD)/bench/compile_bench
	./$(BUILD)/bench/exec_bench
	./$(BUILD)/bench/server_bench
	./$(BUILD)/bench/fleet_bench
	./$(BUILD)/bench/mount_bench

format:
	clang-format -i $$(git ls-files '*.cc' '*.h')

clean:
	rm -rf $(BUILD) $(SAN_BUILD)
