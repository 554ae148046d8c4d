# Corral - a thin wrapper over Meson. Every target first runs 'deps', which
# installs missing Debian packages with apt-get (through sudo when not root).

BUILD      ?= build
ASAN_BUILD ?= build-asan
CLANG_BUILD ?= build-clang
TSAN_BUILD ?= build-tsan
# The tests run against the ThreadSanitizer build of corral (the controller,
# agents and gateway they start; tests/tsan_wrap.sh): every report fails.
TSAN_TESTS = controller multi-agent agent-e2e netns-agents gateway-proxy gateway-controller \
             gateway-drain gateway-failover
MESON_OPTS ?= -Dwerror=true

# Debian packages needed to build and test.
PKGS = meson ninja-build pkg-config gcc clang clang-format libclang-rt-14-dev \
       libmicrohttpd-dev libjansson-dev libsqlite3-dev libglpk-dev libsodium-dev libssl-dev \
       libcurl4-openssl-dev libcmocka-dev prometheus iproute2 procps curl faketime \
       debhelper dpkg-dev fakeroot lintian systemd nodejs chromium \
       podman runc busybox-static etcd-server etcd-client openssl
# Extra packages for 'make bench' (peers and load generators).
BENCH_PKGS = wrk nginx hyperfine

.PHONY: all deps bench-deps build test demo bench bench-ab format format-check clean fuzz install deb

all: build

deps:
	@./scripts/deps.sh $(PKGS)
	@[ -d tests/ui/node_modules/puppeteer-core ] || (cd tests/ui && npm ci --ignore-scripts --no-audit --no-fund --silent) \
	    || echo "deps: npm ci in tests/ui failed: the browser test tries again"

bench-deps: deps
	@./scripts/deps.sh $(BENCH_PKGS)

$(BUILD)/build.ninja:
	meson setup $(BUILD) $(MESON_OPTS)

build: deps $(BUILD)/build.ninja
	ninja -C $(BUILD)

$(ASAN_BUILD)/build.ninja:
	meson setup $(ASAN_BUILD) $(MESON_OPTS) -Db_sanitize=address,undefined -Db_lundef=false

$(CLANG_BUILD)/build.ninja:
	CC=clang meson setup $(CLANG_BUILD) $(MESON_OPTS)

$(TSAN_BUILD)/build.ninja:
	meson setup $(TSAN_BUILD) $(MESON_OPTS) -Db_sanitize=thread -Db_lundef=false

format-check:
	@./scripts/format.sh --check

format:
	@./scripts/format.sh

# The whole suite: format, gcc build + tests, ASan+UBSan build + tests
# (the Slurm peer of slurm-corpus runs in the gcc pass only: it checks
# Slurm, not our memory),
# the daemons of TSAN_TESTS under ThreadSanitizer (only the corral binary
# is built with it), and a clean clang build.
test: deps format-check $(BUILD)/build.ninja $(ASAN_BUILD)/build.ninja $(CLANG_BUILD)/build.ninja \
      $(TSAN_BUILD)/build.ninja
	ninja -C $(BUILD)
	meson test -C $(BUILD) --print-errorlogs --num-processes 2
	ninja -C $(ASAN_BUILD)
	CORRAL_NO_SLURM_PEER=1 meson test -C $(ASAN_BUILD) --print-errorlogs --num-processes 2 --timeout-multiplier 3
	ninja -C $(TSAN_BUILD) corral
	CORRAL_TSAN_BIN=$(abspath $(TSAN_BUILD))/corral meson test -C $(BUILD) --setup tsan \
	    --no-rebuild --print-errorlogs --num-processes 2 $(TSAN_TESTS)
	ninja -C $(CLANG_BUILD)
	@echo "make test: all green"

# Install into $(DESTDIR)$(PREFIX): the binary, share/corral (catalog,
# prices, clusters), man page, bash completion, example configs and the
# systemd units (docs/install.md). The data is found from the prefix at
# run time, so a DESTDIR tree can be moved as a whole.
PREFIX ?= /usr/local
DESTDIR ?=
install: build
	meson configure $(BUILD) -Dprefix=$(PREFIX)
	ninja -C $(BUILD)
	meson install -C $(BUILD) --no-rebuild $(if $(DESTDIR),--destdir "$(DESTDIR)")

# The Debian package (../corral_*.deb), without re-running the suite.
deb: deps
	DEB_BUILD_OPTIONS=nocheck dpkg-buildpackage -b -us -uc

demo: build
	@./scripts/demo.sh $(BUILD)/corral

bench: bench-deps build
	@./scripts/bench.sh $(BUILD)

# This tree's hot paths against an earlier release, in the same minutes
# (bench/ab.sh; docs/operations.md, "Regression bench"):
#     make bench-ab REF=9a4a719 [PAIRS=5] [FIGURES=e2e,submit,...]
REF ?=
PAIRS ?= 5
FIGURES ?= e2e,submit,sched,advise,gateway,sim
bench-ab: bench-deps build
	@[ -n "$(REF)" ] || { echo "make bench-ab: set REF (a commit, tag or branch)"; exit 2; }
	@bench/ab.sh --build $(BUILD) --pairs $(PAIRS) --figures $(FIGURES) $(REF)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(CLANG_BUILD) $(TSAN_BUILD)

# Coverage-guided fuzzing of every parser (clang + libFuzzer), FUZZ_SECONDS each.
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 30
fuzz: deps
	[ -f $(FUZZ_BUILD)/build.ninja ] || CC=clang meson setup $(FUZZ_BUILD) -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false
	ninja -C $(FUZZ_BUILD)
	@for f in $(FUZZ_BUILD)/fuzz/fuzz_*; do \
	    [ -f "$$f" ] && [ -x "$$f" ] || continue; echo "== $$f"; \
	    "$$f" -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 2>&1 | tail -3 || exit 1; \
	done
