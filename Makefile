# Causeway developer commands. `make help` lists them.
GO       ?= go
PKGS     ?= ./...
# apt needs root: sudo when make does not run as root.
SUDO     := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# Seeds for the causal simulation run by `make test`; raise it for a soak.
SIM_SEEDS ?= 300
# Kills of the chaos test in `make test`, on each client (make test-all
# makes the test's own 50).
CHAOS_KILLS ?= 20
BENCHTIME ?= 500ms
BENCHCOUNT ?= 5
E2E_RECORDS ?= 200000
E2E_RUNS ?= 7
STATE_KEYS ?= 1000000,5000000
# The worker's Kafka client library for make run and make run-orders:
# librdkafka or franz (pure Go).
CLIENT   ?= librdkafka

.PHONY: help run run-orders run-clicks run-regions run-connect run-cdc test test-all test-purego clean chromium postgres test-browser test-short lint bench bench-scale bench-state bench-instructions fuzz tidy

help: ## List the targets.
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

run: ## Count the words of a bundled book on the embedded broker, then print the top words (CLIENT=franz for the pure-Go client).
	$(GO) run ./examples/wordcount demo -client $(CLIENT)

run-orders: ## The orders shop with lagging partitions, gate on and gate off, side by side; then a client reading its own writes (CLIENT=franz too).
	$(GO) run ./examples/orders demo -client $(CLIENT)

run-clicks: ## Page views joined to user profiles, counted per region in one-minute windows by the time in their JSON, each window emitted once when it closes; bad JSON to the dead-letter topic; checked against an independent count (CLIENT=franz too).
	$(GO) run ./examples/clicks demo -client $(CLIENT)

run-cdc: postgres ## A shop's multi-table transactions captured from Postgres (PostgresCdcSource) and written into two databases: by the causal sink, whole, and by a sink per topic without the gate; a reader checks the shop's invariants on each every 10 ms and prints the torn reads (CLIENT=franz too).
	$(GO) run ./examples/cdc -client $(CLIENT)

run-regions: ## Orders joined with their customers on a foreign key and totalled by region; customers then move region, orders change and go: each region's total checked against one computed from the rows written (CLIENT=franz too).
	$(GO) run ./examples/regions demo -client $(CLIENT)

run-connect: postgres ## The shop's orders, payments and shipments written into Postgres tables with foreign keys by the causal sink, a lagging partition's worker starting late: gate on and gate off side by side (CLIENT=franz too).
	$(GO) run ./examples/shopsink -client $(CLIENT)

# The race detector's runtime sleeps a second before a test binary exits,
# for reports of other threads to come out; a race found during a test
# fails that test anyway. Without the sleep, make test's 40-odd race-built
# test binaries end 20 s sooner on 2 cores.
export GORACE ?= atexit_sleep_ms=0

# The packages whose tests run with the race detector: all but causal, a
# pure state machine with no goroutines, whose simulation the detector
# only slows down tenfold.
# The packages whose tests take longest, most of it waiting on a broker,
# Postgres or Chromium, are listed first, so that they start first and
# the others fill the time they wait.
ALL_PKGS = $(shell $(GO) list $(PKGS))
LONG_PKGS = $(foreach p,/runtime /runtime/pagetest /runtime/sinkworker /runtime/connectworker /examples/orders /examples/wordcount,$(filter %$(p),$(ALL_PKGS)))
RACE_PKGS = $(LONG_PKGS) $(filter-out $(LONG_PKGS) %/causal,$(ALL_PKGS))
CAUSAL_PKGS = $(filter %/causal,$(ALL_PKGS))
# The packages a build without cgo changes: the runtime (its transports)
# and whatever tests run it. The others' test binaries are the same
# either way.
PUREGO_PKGS = $(shell CGO_ENABLED=0 $(GO) list -test -f '{{.ImportPath}} {{join .Deps " "}}' $(PKGS) | \
	awk '$$1 ~ /causeway\/runtime(_test)?$$/ { print $$1; next } { for (i = 2; i <= NF; i++) if ($$i ~ /causeway\/runtime$$/) { print $$1; next } }' | \
	sed -e 's/\.test$$//' -e 's/_test$$//' | sort -u)

# The worker processes the runtime's crash and rebalance tests spawn: its
# test binary built without the race detector (see workerBinary in
# runtime/process_test.go).
WORKER_BIN = $(TESTBIN_DIR)/plain/runtime.test
# make test builds each test binary into a folder of TESTBIN_DIR (one for
# each way it is built) and runs it from there with TESTBINS, as go test
# would run it: a binary whose inputs did not change since the last run is
# not linked again, which go test does every time. Linking took more than
# a third of make test's CPU time: a race-built test binary with
# librdkafka in it takes 3 to 8 CPU-seconds. TEST_P binaries run at once,
# as many as go test runs (-p): one a core. The binaries take about 1.5 GB;
# make clean removes them.
TESTBIN_DIR = $(CURDIR)/.build/tests
TESTBINS = $(CURDIR)/internal/testbins/run
TEST_P ?= $(shell getconf _NPROCESSORS_ONLN)
# Tests sharing a broker wait on it more than they compute: more of them at
# once than there are cores.
PARALLEL ?= 8
# The multi-process tests (the runtime's kill -9, chaos, scaling,
# standbys, fencing and start-up; the kill -9 of the sink, the connect
# sources and the change data capture):
# the code they test runs in worker processes, built without the race
# detector (WORKER_BIN; the sink and connect tests spawn their own test
# binary, built so by this run); the test process only runs the embedded
# broker and the checkers, which the race detector would slow down
# several times over for nothing. make test runs them without it, beside
# the race-detected run of every other test; make test-all runs them with
# it, against race-built workers.
PROCESS_TESTS = ^(TestCrashRecoveryExactlyOnce|TestRebalanceExactlyOnce|TestChaosExactlyOnce|TestScalingStopsOnlyTheTasksThatMove|TestStandbysRestoreLittleOnFailover|TestNewWorkersWarmUpBeforeTakingTasks|TestAFencedWorkerExitsWithCode1|TestAStateDirInUseIsRefused|TestAnUnreachableClusterIsRetriedThenRefusedOnBothClients|TestAWorkerWaitsForItsTopicsAndSaysSo|TestSinkWorkersKilledWriteEveryRecordOnce|TestAKilledSourceWorkerWritesEveryRowOnce|TestAKilledCaptureWorkerWritesEveryChangeOnce)$$
PROCESS_PKGS = ./runtime/ ./runtime/sinkworker/ ./runtime/connectworker/
PROCESS_LOG = $(CURDIR)/.build/process-tests.log
CAUSAL_LOG = $(CURDIR)/.build/causal-tests.log

test: chromium postgres ## Lint (the gate's simulation beside it), then run every test (the worker's page in headless Chromium among them) with the race detector where there are goroutines (the multi-process tests beside them without it, see PROCESS_TESTS), and, beside them, what a build without cgo changes; meant to take under 3 minutes on 2 cores: 152 to 179 s in eight warm runs on 7 Dec 2026 (median 162 s) with no test binary to link again (TESTBINS) and the test Postgres in memory (internal/pgtest), 166 to 184 s with it on disk, 243 s when every test binary is linked (a clean clone, as CI runs it); 213 to 230 s when go test linked every test binary on every run, and 167 to 184 s before the Connect and table tests of issues 49 and 51.
	@# In the background, their output kept for the end: the gate's tests
	@# with causal_mutants, which builds the gate's deliberate defects in
	@# for the negative controls that show the simulation's checker
	@# catches them, beside lint, which leaves a core idle a third of its
	@# time; then the multi-process tests and the tests a build without
	@# cgo changes (test-purego). Every test binary is built into
	@# $(TESTBIN_DIR) and run from there (TESTBINS).
	@mkdir -p $(dir $(CAUSAL_LOG)); status=0; \
	$(if $(CAUSAL_PKGS),( CAUSEWAY_SIM_SEEDS=$(SIM_SEEDS) $(TESTBINS) $(TESTBIN_DIR)/mutants 1 "-tags causal_mutants" $(CAUSAL_PKGS) -- -test.count=1 -test.timeout=5m ) > $(CAUSAL_LOG) 2>&1,: > $(CAUSAL_LOG)) & gate=$$!; \
	$(MAKE) --no-print-directory lint || { wait $$gate; exit 1; }; \
	echo "$(GO) test -c -o $(dir $(WORKER_BIN)) $(PROCESS_PKGS)"; \
	$(GO) test -c -o $(dir $(WORKER_BIN)) $(PROCESS_PKGS) || { wait $$gate; exit 1; }; \
	( CAUSEWAY_CHAOS_KILLS=$(CHAOS_KILLS) CAUSEWAY_WORKER_BINARY=$(WORKER_BIN) $(TESTBINS) $(dir $(WORKER_BIN)) $(TEST_P) "" $(PROCESS_PKGS) -- -test.count=1 -test.parallel=$(PARALLEL) -test.timeout=12m -test.run='$(PROCESS_TESTS)'; procs=$$?; \
	  $(MAKE) --no-print-directory test-purego PUREGO_RUN='$(PUREGO_SMOKE)' PUREGO_PKGS='$(PUREGO_SMOKE_PKGS)' && exit $$procs ) > $(PROCESS_LOG) 2>&1 & proc=$$!; \
	echo "CAUSEWAY_WORKER_BINARY=$(WORKER_BIN) CAUSEWAY_SIM_SEEDS=$(SIM_SEEDS) $(TESTBINS) $(TESTBIN_DIR)/race $(TEST_P) -race <every package but causal> -- -test.count=1 -test.parallel=$(PARALLEL) -test.timeout=12m -test.skip='$(PROCESS_TESTS)'"; \
	CAUSEWAY_WORKER_BINARY=$(WORKER_BIN) CAUSEWAY_SIM_SEEDS=$(SIM_SEEDS) $(TESTBINS) $(TESTBIN_DIR)/race $(TEST_P) -race $(RACE_PKGS) -- -test.count=1 -test.parallel=$(PARALLEL) -test.timeout=12m -test.skip='$(PROCESS_TESTS)' || status=1; \
	wait $$gate || status=1; wait $$proc || status=1; \
	echo "the gate's tests, with its deliberate defects built in:"; cat $(CAUSAL_LOG); \
	echo "the multi-process tests, without the race detector, then the tests without cgo:"; cat $(PROCESS_LOG); \
	exit $$status

clean: ## Remove what make test keeps between runs (its test binaries and logs, in .build).
	rm -rf $(CURDIR)/.build

# What make test runs again without cgo: the tests of the code only such a
# build has or lacks (the client list, the refusal of librdkafka). The
# worker's franz-go code is the same with cgo or without, and the
# multi-process tests run it through kill -9 already; lint type-checks
# every package without cgo. make test-all runs every test of those
# packages so. PUREGO_SMOKE_PKGS are the packages with such tests: each
# package more is one more test binary to link.
PUREGO_SMOKE = Client|Flag
PUREGO_SMOKE_PKGS = ./runtime/ ./examples/internal/demoworker/
PUREGO_RUN ?=

test-all: lint chromium postgres ## make test with race-built worker processes, the chaos test's full 50 kills, the connect worker's in-process tests and the sink's gate test on the embedded broker through both clients as well, and every test of the packages a build without cgo changes run again so (about 8 minutes on 2 cores).
	$(if $(CAUSAL_PKGS),CAUSEWAY_SIM_SEEDS=$(SIM_SEEDS) $(GO) test -tags causal_mutants -count=1 -timeout 5m $(CAUSAL_PKGS))
	CAUSEWAY_TEST_BROKER=1 CAUSEWAY_SIM_SEEDS=$(SIM_SEEDS) $(GO) test -race -count=1 -parallel $(PARALLEL) -timeout 20m $(RACE_PKGS)
	$(MAKE) --no-print-directory test-purego

test-purego: ## The tests of the packages a build without cgo changes (the runtime and what runs it), built so: the worker on franz-go alone; no race detector, which needs cgo. PUREGO_RUN narrows them with -run.
	CGO_ENABLED=0 CAUSEWAY_SIM_SEEDS=40 $(TESTBINS) $(TESTBIN_DIR)/purego $(TEST_P) "" $(PUREGO_PKGS) -- -test.count=1 -test.parallel=$(PARALLEL) -test.timeout=10m $(if $(PUREGO_RUN),-test.run='$(PUREGO_RUN)')

chromium: ## Install Debian's Chromium, which the page test drives, when it is missing: it and what it depends on, nothing recommended beside.
	@command -v chromium >/dev/null || ($(SUDO) apt-get update -q && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium)

postgres: ## Install Debian's PostgreSQL server, which the sink's tests start in a temporary directory (internal/pgtest), when it is missing.
	@command -v pg_ctl >/dev/null || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || \
		($(SUDO) apt-get update -q && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends postgresql)

# Where make test-browser saves the page's screenshot; empty: nowhere.
SCREENSHOT ?=

test-browser: chromium ## Drive the worker's page in headless Chromium alone; SCREENSHOT=docs/img/worker-page.png saves its screenshot for docs/operations.md.
	CAUSEWAY_SCREENSHOT=$(if $(SCREENSHOT),$(abspath $(SCREENSHOT))) $(GO) test -count=1 ./runtime/pagetest/

test-short: ## Run the tests without the race detector and with fewer seeds.
	CAUSEWAY_SIM_SEEDS=40 $(GO) test -count=1 $(PKGS)

# staticcheck and gocyclo, run from the module proxy at pinned versions.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
GOCYCLO ?= github.com/fzipp/gocyclo/cmd/gocyclo@v0.6.0
# The most a function's cyclomatic complexity and a file's lines may be,
# tests and generated code aside.
MAX_CYCLO ?= 25
MAX_LINES ?= 700

lint: ## gofmt, go vet and staticcheck, with cgo and without; no function over cyclomatic $(MAX_CYCLO) nor file over $(MAX_LINES) lines outside tests; the fields of a //causeway:owned type written only by its methods (ownercheck); every package, the worker examples among them, type-checked without cgo (go vet).
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	@long=$$(grep -L '^// Code generated .* DO NOT EDIT\.$$' $$(git ls-files '*.go' ':!:*_test.go' 2>/dev/null || find . -name '*.go' ! -name '*_test.go') | \
		xargs wc -l | awk '$$2 != "total" && $$1 > $(MAX_LINES)'); \
	if [ -n "$$long" ]; then echo "files over $(MAX_LINES) lines (split them by concern):"; echo "$$long"; exit 1; fi
	$(GO) run $(GOCYCLO) -over $(MAX_CYCLO) -ignore '_test\.go$$' .
	$(GO) vet $(PKGS)
	$(GO) vet -tags causal_mutants ./causal/
	@# A part's fields are written by its own methods only (internal/ownercheck).
	$(GO) run ./internal/ownercheck/cmd/ownercheck -test=false $(PKGS)
	@# Without cgo, the librdkafka transport, the Schema Registry serdes and
	@# the end-to-end benchmark (all built on confluent-kafka-go) drop out.
	CGO_ENABLED=0 $(GO) vet $(PKGS)
	$(GO) run $(STATICCHECK) $(PKGS)
	CGO_ENABLED=0 $(GO) run $(STATICCHECK) $(PKGS)

bench: ## Micro benchmarks of the causal core, then the end-to-end comparison on both clients, stream threads pinned (about 40 minutes); results in bench-results/.
	@# Whole rounds of every benchmark, not each benchmark $(BENCHCOUNT) times in a row: the
	@# two sides of each ratio are then measured a minute apart at most, whatever the machine does.
	@rm -f bench-causal.txt; for round in $$(seq $(BENCHCOUNT)); do \
		$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -count 1 ./causal/ | tee -a bench-causal.txt; \
	done
	@# A missed target fails the make, but only after the end-to-end comparison has run too.
	@status=0; \
	$(GO) run ./bench/benchreport < bench-causal.txt || status=1; \
	$(GO) run ./bench/e2ebench -records $(E2E_RECORDS) -runs $(E2E_RUNS) -out bench-results || status=1; \
	$(GO) run ./bench/e2ebench -pin -configs on,threads -records $(E2E_RECORDS) -runs 3 -out bench-results/threads || status=1; \
	$(GO) run ./bench/querybench -out bench-results || status=1; \
	$(GO) run ./bench/sinkbench -out bench-results || status=1; \
	$(GO) run ./bench/cdcbench -out bench-results || status=1; \
	$(GO) test -run '^$$' -bench 'Plain|Versioned' -benchmem -count $(BENCHCOUNT) ./framework/store/pebblestore/ | tee bench-results/versioned.txt || status=1; \
	$(GO) test -run '^$$' -bench 'TableJoinUpdates|CountUpdates' -benchmem -count $(BENCHCOUNT) ./framework/dsl/ | tee bench-results/dsl.txt || status=1; \
	exit $$status

bench-scale: ## Workers added and killed under steady input: how long partitions stop, and what is restored, with and without standby replicas and warm-ups (about 5 minutes); results in bench-results/.
	$(GO) run ./bench/scalebench -out bench-results

bench-state: ## State on disk against state in memory at 1M and 5M keys: processing, memory, restarts, restores (about 10 minutes); results in bench-results/.
	$(GO) run ./bench/statebench -keys $(STATE_KEYS) -out bench-results

bench-instructions: ## Instructions a record of the task's path (BenchmarkPassThrough) under callgrind: with the collector off they do not scatter as timings do; needs valgrind.
	@command -v valgrind >/dev/null || { echo "bench-instructions needs valgrind (apt-get install valgrind)"; exit 1; }
	@$(GO) test -c -o bench-task.test ./framework/task/
	@# The difference of two run lengths leaves out the set-up; one P and no
	@# preemption signals keep callgrind deterministic.
	@for b in gate-on/same-clock gate-on/moving-clock gate-off/same-clock; do \
		for gc in off 100; do \
			for n in 100000 300000; do \
				GODEBUG=asyncpreemptoff=1 GOMAXPROCS=1 GOGC=$$gc valgrind --tool=callgrind --callgrind-out-file=/dev/null \
					./bench-task.test -test.run '^$$' -test.bench "PassThrough/$$b" -test.benchtime $${n}x 2>&1 \
					| awk '/Collected/ {print $$4}'; \
			done | paste -sd' ' | awk -v b=$$b -v gc=$$gc '{printf "%-22s GOGC=%-3s %7.0f instructions a record\n", b, gc, ($$2-$$1)/200000}'; \
		done; \
	done; rm -f bench-task.test

fuzz: ## Fuzz the clock decoder for a minute.
	$(GO) test -run '^$$' -fuzz FuzzDecodeClock -fuzztime 60s ./causal/

tidy: ## go mod tidy.
	$(GO) mod tidy
