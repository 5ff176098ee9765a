# zkrecipes development tasks. "make help" lists them.

SHELL := /bin/bash
.DEFAULT_GOAL := help

GO ?= go
GOFMT ?= $(shell $(GO) env GOROOT)/bin/gofmt
ZK := scripts/zk.sh

# Port of the ZooKeeper server started by zk-up and demo (scripts/zk.sh's default).
ZK_PORT ?= 21811
# Extra flags for go test (make test TESTFLAGS='-run Mutex -v').
TESTFLAGS ?=
# How long the soak run lasts (make soak DURATION=10m).
DURATION ?= 1m
# Flags for the benchmark program (make bench BENCHFLAGS='-h').
BENCHFLAGS ?=
# Fuzzing time per fuzz target: a duration, or a count of executions (Nx),
# which Go 1.26 ends without the race of a duration's deadline (.ci/run).
FUZZTIME ?= 10s
# FuzzHostileServer runs the whole client against a fake server per input
# (about 100 inputs a second): its own, smaller count.
HOSTILE_FUZZTIME ?= 2000x
# Flags for the demo (make demo DEMOFLAGS='-workers 8 -increments 10').
DEMOFLAGS ?= -workers 4 -increments 25
# staticcheck 2025.1.1 (module version v0.6.1); not a dependency in go.mod.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.6.1
# The workspace written by scripts/patched-zk.sh: this module with go-zookeeper
# as released plus patches/ (see patches/*.patch). Every target that builds
# exports it as GOWORK, so the repository's own builds use the patched client.
ZK_GOWORK := $(CURDIR)/.cache/go.work
# Flags for scripts/outside-module.sh. Without --patched it builds against
# go-zookeeper as released: make test-outside OUTSIDEFLAGS='--runs 5' counts
# the data race reports in 5 runs.
OUTSIDEFLAGS ?= --patched
# A test that finds no ZooKeeper fails instead of being skipped (zktest).
export ZKTEST_REQUIRED := 1

# Flags for the analysis (make analysis ANALYSISFLAGS='-members 5 -seeds random:3 -length 5m').
ANALYSISFLAGS ?= -members 3 -seeds random:3 -length 45s

.PHONY: analysis help zk-install interop-install curator-install zk-up zk-down patched-zk demo test test-outside race-workaround test-short test-faults scale test-liveness contract simulate plants test-procs soak bench bench-peers lint fuzz test-hostile

analysis demo test test-short test-faults scale test-liveness contract simulate test-procs soak bench bench-peers lint fuzz: export GOWORK := $(ZK_GOWORK)
analysis demo test test-outside test-short test-faults scale test-liveness contract simulate test-procs soak bench bench-peers lint fuzz: patched-zk

help: ## list the targets
	@echo "usage: make TARGET [VAR=value ...]"
	@awk 'BEGIN { FS = ":.*## " } /^[a-z][a-z-]*:.*## / { printf "  %-15s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

zk-install: ## install ZooKeeper (Debian's zookeeper package) if missing; needs root or sudo
	$(ZK) install

interop-install: ## install ZooKeeper, Debian's Curator jars, a JDK and python3-kazoo if missing (the interop tests need them)
	$(ZK) install --curator --kazoo

curator-install: interop-install ## the same as interop-install (its former name)

zk-up: zk-install ## start a local ZooKeeper server on 127.0.0.1:ZK_PORT (data under ~/.cache/zkrecipes, see scripts/zk.sh)
	$(ZK) start --port $(ZK_PORT)

zk-down: ## stop the server started by zk-up
	$(ZK) stop

patched-zk: ## fetch go-zookeeper from the module proxy and apply patches/ (into .cache/, with .cache/go.work)
	GO=$(GO) scripts/patched-zk.sh

demo: zk-install zk-up ## start ZooKeeper, run processes contending for a mutex (then one stalled and fenced), stop ZooKeeper
	@trap '$(ZK) stop' EXIT; set -e; \
	$(GO) build -o .cache/mutex-counter ./examples/mutex-counter; \
	.cache/mutex-counter -zk 127.0.0.1:$(ZK_PORT) $(DEMOFLAGS); \
	echo; echo "Now worker 2 stalls while it holds the mutex, as in a long GC pause; its session expires:"; \
	.cache/mutex-counter -zk 127.0.0.1:$(ZK_PORT) -workers 3 -increments 6 -stall 2

test: interop-install ## run every test (the fault suite aside: test-faults), against real ZooKeeper servers, Curator and kazoo, with the race detector
	$(GO) test -race -count=1 -timeout 15m $(TESTFLAGS) $$($(GO) list ./... | grep -v /internal/faults)
	GO=$(GO) scripts/outside-module.sh $(OUTSIDEFLAGS)

test-outside: zk-install ## run examples/testing as a module of its own outside the repository (scripts/outside-module.sh)
	GO=$(GO) scripts/outside-module.sh $(OUTSIDEFLAGS)

race-workaround: zk-install ## run the -race workaround of docs/testing.md, as printed there, in a fresh module outside the repository (scripts/race-workaround.sh)
	GOWORK=off GO=$(GO) scripts/race-workaround.sh

analysis: zk-install ## the analysis on a real ensemble under faults between servers (docs/analysis.md): 3 random seeds, 45s of faults each, with the controls
	$(GO) run ./internal/analysis/cmd/zkanalysis $(ANALYSISFLAGS)

test-short: ## run the tests that need no ZooKeeper server
	$(GO) test -short ./...

test-faults: zk-install ## run the fault x recipe matrix and the scale tests (docs/reliability.md)
	$(GO) test -race -count=1 -timeout 20m -v $(TESTFLAGS) ./internal/faults/

scale: zk-install ## run the scale tests at their largest sizes: 100,000 locks on one session and on 4, AcquireN up to 8,000, Participants and ParticipantNodes of 100,000 nodes, 20,000 handles, 6,000 timed-out attempts, a burst of 10,000 waiters from one client (docs/performance.md, "Scale")
	SCALE_LOCKS=100000 SCALE_ACQUIREN_MAX=8000 SCALE_PARTICIPANTS=100000 SCALE_HANDLES=20000 SCALE_ATTEMPTS=6000 SCALE_ATTEMPTS_AT_ONCE=1 SCALE_BURST=10000 $(GO) test -count=1 -timeout 40m -v -run '^TestScale(ManyLocks|AcquireN|Participants|ParticipantNodes|DirectoryACLHandles|TimedOutAttempts|BurstOneClient)$$' $(TESTFLAGS) ./internal/faults/
	SCALE_LOCKS=100000 SCALE_LOCK_SESSIONS=4 $(GO) test -count=1 -timeout 30m -v -run '^TestScaleManyLocks$$' $(TESTFLAGS) ./internal/faults/

test-liveness: zk-install ## run the liveness grid's whole product, recipe x end x mode (make test-faults runs a pairwise subset; docs/failure-model.md, "Progress after a fault")
	FAULTS_LIVENESS=full $(GO) test -race -count=1 -timeout 40m -v -run '^TestLiveness$$' $(TESTFLAGS) ./internal/faults/

contract: zk-install ## show each go-zookeeper contract test failing against a go-zookeeper that breaks its assumption (recipe/internal/transport/testdata/contract/)
	GO=$(GO) scripts/contract-breaks.sh

SCHEDULES ?= 100000
SEED ?= 0

test-hostile: zk-install ## the hostile-wire tests (bad frames from fake servers and a tampering proxy, peak RSS, watches across a reconnect) on go-zookeeper as released, GOWORK=off: not the patched copy
	GOWORK=off $(GO) test -count=1 -run '^(TestHostile|FuzzHostileServer$$|TestWatchResentAfterReconnect$$|TestObserverAfterReconnect$$|TestSemaphoreWaiterAfterReconnect$$)' ./recipe/

simulate: ## run the engine against the in-memory ZooKeeper under virtual time: SCHEDULES fault schedules (default 100000) from SEED (0: from the clock), no race detector (docs/simulation.md)
	$(GO) test -count=1 -timeout 0 -run '^TestSimulate$$' -v ./recipe/ -args -sim.schedules=$(SCHEDULES) -sim.seed=$(SEED) $(SIMFLAGS)

plants: patched-zk ## plant each bug of recipe/testdata/plants in a scratch worktree and show that the simulation finds it (docs/simulation.md)
	GO=$(GO) scripts/plants.sh

test-procs: zk-install ## holders as OS processes, killed (SIGKILL) and paused (SIGSTOP/SIGCONT) 20 times per recipe
	FAULTS_PROCS=full $(GO) test -race -count=1 -timeout 20m -parallel 4 -v -run '^TestProcesses$$' ./internal/faults/

soak: zk-install ## run every recipe under random faults for DURATION (default 1m)
	$(GO) run ./internal/soak -duration $(DURATION)

bench: zk-install ## run the go test benchmarks, the side-by-side runner, then its scale suite (installs Curator and kazoo if missing; charts into docs/img) against real ZooKeeper
	$(GO) test -run='^$$' -bench=. -benchtime=1s ./mutex/
	$(GO) run ./internal/bench $(BENCHFLAGS)
	$(ZK) install --curator --kazoo
	mkdir -p docs/img
	$(GO) run ./internal/bench -suite scale -charts docs/img $(BENCHFLAGS)

bench-peers: ## install Curator and kazoo if missing, then run the runner's peers suite (docs/performance.md); BENCHFLAGS='-baseline REV -fsync=false -rounds 7' adds this module at git revision REV
	$(ZK) install --curator --kazoo
	$(GO) run ./internal/bench -suite peers $(BENCHFLAGS)

lint: ## check formatting (gofmt), go vet and staticcheck
	@out=$$(find . -name '.?*' -prune -o -name '*.go' -print | xargs $(GOFMT) -l); \
	if [[ -n $$out ]]; then echo "gofmt: not formatted:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

fuzz: ## run the fuzz targets for FUZZTIME each
	$(GO) test -run='^$$' -fuzz=FuzzSort -fuzztime=$(FUZZTIME) ./driver/
	$(GO) test -run='^$$' -fuzz=FuzzSequence -fuzztime=$(FUZZTIME) ./driver/
	$(GO) test -run='^$$' -fuzz=FuzzValidatePath -fuzztime=$(FUZZTIME) ./recipe/
	$(GO) test -run='^$$' -fuzz=FuzzWireTap -fuzztime=$(FUZZTIME) ./recipe/
	$(GO) test -run='^$$' -fuzz=FuzzHostileServer -fuzztime=$(HOSTILE_FUZZTIME) ./recipe/
	$(GO) test -run='^$$' -fuzz=FuzzRequest -fuzztime=$(FUZZTIME) ./recipe/internal/jute/
	$(GO) test -run='^$$' -fuzz=FuzzReply -fuzztime=$(FUZZTIME) ./recipe/internal/jute/
	$(GO) test -run='^$$' -fuzz=FuzzCheckReply -fuzztime=$(FUZZTIME) ./recipe/internal/jute/
