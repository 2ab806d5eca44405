# softrnic top-level driver.  `make demo` and `make check` each do their own
# set-up on a fresh Debian 12 machine: install missing packages (as root) or
# print the apt-get line, configure, build, run.
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=

BUILD_PKGS = cmake gcc make pkg-config libibverbs-dev librdmacm-dev libisal-dev
TEST_PKGS = ibverbs-utils perftest rdmacm-utils iproute2 tshark
# clang + its runtime: the libFuzzer smoke test (tests/e2e/fuzz_smoke.sh)
TEST_PKGS += clang libclang-rt-14-dev
# valgrind: the rdma_cm connect/disconnect leak check (tests/api/test_cm_leaks.c)
TEST_PKGS += valgrind
# The middleware and tools users run on RDMA, each driven by a test in tests/e2e/:
# qperf, UCX (ucx_perftest), libfabric (fi_pingpong), Open MPI over UCX (with
# its compiler wrapper for tests/mpi), rdma-core's own test suite (pyverbs).
TEST_PKGS += qperf ucx-utils libfabric-bin openmpi-bin libopenmpi-dev python3-pyverbs
# nft and ethtool: the fault tests (tests/net/fault_*.sh): loss, outage, veth offloads
TEST_PKGS += nftables ethtool
DEMO_PKGS =
BENCH_PKGS = iperf3 gnuplot-nox ucx-utils libfabric-bin

.PHONY: all build deps deps-test deps-bench configure demo check bench bench-flows bench-scale bench-delay fault-bench interop fuzz clean \
	sanitize sanitize-asan sanitize-tsan \
	install uninstall deb

all: build

deps:
	@scripts/need-packages.sh $(BUILD_PKGS) $(DEMO_PKGS)

deps-test:
	@scripts/need-packages.sh $(BUILD_PKGS) $(TEST_PKGS)

deps-bench:
	@scripts/need-packages.sh $(BUILD_PKGS) $(TEST_PKGS) $(BENCH_PKGS)

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

configure: $(BUILD)/CMakeCache.txt

build: configure
	cmake --build $(BUILD) -j $(JOBS)

demo: deps
	@$(MAKE) --no-print-directory build
	@$(BUILD)/bin/softrnic-demo

check: deps-test
	@$(MAKE) --no-print-directory build
	cd $(BUILD) && $(CURDIR)/scripts/ctest-progress.sh --output-on-failure --timeout 600 -j 1

bench: deps-bench
	@$(MAKE) --no-print-directory build
	@SRN_BUILD=$(abspath $(BUILD)) bench/run.sh

# Several flows between two namespaces, steering on and off (root).
bench-flows: deps-bench
	@$(MAKE) --no-print-directory build
	@SRN_BUILD=$(abspath $(BUILD)) bash bench/flows.sh

# Memory and time per QP and per MR at 10k QPs and 100k MRs, and 8/32
# processes sharing a device, both paths (docs/scale.md).
bench-scale: deps-bench
	@$(MAKE) --no-print-directory build
	@SRN_BUILD=$(abspath $(BUILD)) bench/scale.sh

# RC WRITE through loss and delay (a user-space relay between two
# namespaces) beside the relay's own TCP rate; BASE=DIR adds another
# build's rows to the same run (root).
bench-delay: deps-bench
	@$(MAKE) --no-print-directory build
	@SRN_BUILD=$(abspath $(BUILD)) bench/delay.sh $(if $(BASE),-B $(BASE))

# softrnic against Linux Soft-RoCE (rdma_rxe) in a qemu guest: both roles,
# 1% loss each way, MTU 4096 (root; docs/interop.md). Not part of make check.
INTEROP_PKGS = qemu-system-x86 kmod cpio
interop:
	@scripts/need-packages.sh $(BUILD_PKGS) ibverbs-utils perftest rdmacm-utils iproute2 $(INTEROP_PKGS)
	@$(MAKE) --no-print-directory build
	@SRN_BUILD=$(abspath $(BUILD)) tests/interop/run.sh

# The fault tests' long mode: 256 MiB per case, one table of rates and counters (root).
fault-bench: deps-test
	@$(MAKE) --no-print-directory build
	@SRN_BUILD=$(abspath $(BUILD)) scripts/fault_bench.sh

# Sanitizer builds beside $(BUILD) (docs/sanitizers.md): ASan+UBSan over the
# whole suite in build-asan/, TSan over the concurrency tests in build-tsan/.
sanitize: sanitize-asan sanitize-tsan
sanitize-asan: deps-test
	@JOBS=$(JOBS) scripts/sanitize-check.sh asan
sanitize-tsan: deps-test
	@JOBS=$(JOBS) scripts/sanitize-check.sh tsan

# Longer fuzzing than make check's smoke run: FUZZ_SECONDS per target.
FUZZ_SECONDS ?= 300
fuzz: deps-test
	@FUZZ_SECONDS=$(FUZZ_SECONDS) SRN_BUILD=$(abspath $(BUILD)) SRN_SOURCE=$(CURDIR) \
		bash tests/e2e/fuzz_smoke.sh

# make install [PREFIX=/usr/local] [DESTDIR=/staging]: the CLI to bin/, the
# libraries to a private lib/softrnic/ (never over rdma-core's), the man
# page and a pkg-config file.  make uninstall removes what it installed.
PREFIX ?= /usr/local
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

uninstall:
	@test -f $(BUILD)/install_manifest.txt || { echo "nothing installed from $(BUILD)"; exit 1; }
	@while read -r f || [ -n "$$f" ]; do rm -fv "$(DESTDIR)$$f"; done < $(BUILD)/install_manifest.txt
	@rmdir "$(DESTDIR)$(PREFIX)"/lib*/softrnic "$(DESTDIR)$(PREFIX)"/lib/*/softrnic 2>/dev/null || true

# make deb: build/softrnic_<version>_<arch>.deb, installing under /usr.
deb: build
	cd $(BUILD) && cpack -G DEB

clean:
	rm -rf $(BUILD) build-asan build-tsan
