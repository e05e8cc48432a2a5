# cutover's build, test and demo entry points. `make test` is the one test command: unit tests,
# real-sshd integration tests, the Debian package's checks and the container end-to-end tests,
# which install that package on the cluster's master.
GO      ?= go
BIN     := bin/cutover
# VERSION is cutover's version and its Debian package's (packaging/version.sh).
VERSION ?= $(shell packaging/version.sh)
LDFLAGS := -s -w -X main.version=$(VERSION)
# DEB is a stable name for the package `make deb` builds as bin/cutover_<version>_<arch>.deb.
DEB     := bin/cutover.deb

.PHONY: build deb deb-testhooks test lint deps images race bench bench-ganeti ganeti-reboots demo demo-rolling demo-down fuzz ganeti-demo ganeti-down crash-all

# The release build: the test hooks (crash points, stage holds) are compiled out (tag release).
build:
	CGO_ENABLED=0 $(GO) build -tags release -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/cutover

# The Debian package, built with dpkg-deb (packaging/build-deb.sh).
deb: build
	@rm -f bin/cutover_*.deb
	@deb=$$(GO="$(GO)" DEB_VERSION="$(VERSION)" packaging/build-deb.sh $(BIN) bin) && ln -sf "$$(basename "$$deb")" $(DEB) && echo "$$deb"

# TEST_DEB is the same package with the test hooks, which the container tests drive (stage
# holds, crash points); it is never shipped.
TEST_BIN := bin/testhooks/cutover
TEST_DEB := bin/testhooks/cutover.deb
deb-testhooks:
	@mkdir -p bin/testhooks && rm -f bin/testhooks/cutover_*.deb
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(TEST_BIN) ./cmd/cutover
	@deb=$$(GO="$(GO)" DEB_VERSION="$(VERSION)" packaging/build-deb.sh $(TEST_BIN) bin/testhooks) && ln -sf "$$(basename "$$deb")" $(TEST_DEB) && echo "$$deb"

deps:
	@test/setup.sh

# -timeout bounds one package's test binary. The container packages and the crash-point test
# start thousands of processes; on a machine where starting one costs ~10 ms of CPU (some
# virtual machines) they take three times as long as elsewhere, so the bound leaves room for
# that: a hang is caught much sooner, by each test's own limits (90 s for a cutover run). On
# a virtual machine whose CPU was throttled, the crash-point test alone has taken 50 minutes
# (its rolling-budget scenarios wait out a batch timeout at every point), and the cmd/cutover
# package 64 minutes inside a whole make test on a 2-core machine (the Ganeti nodes weigh
# more for the CPU than it does); the bound stays under the 90 minutes a CI run may take.
#
# The Ganeti scenarios run one after another on one cluster for a quarter of an hour, mostly
# waiting for it: they start first, as soon as the images are there (they build their own
# cutover), beside every other package, instead of after them. The lint and the fuzz targets
# run beside the tests too: the machine is busy all through the suite, so work done beside it
# costs only its CPU, and work done after it costs its whole time. Their output follows. The
# race detector's packages (make race) run when the other packages are done, beside the
# Ganeti scenarios' last minutes, when those leave the machine half idle.
test: deps images
	@mkdir -p bin; export CUTOVER_DEB="$(CURDIR)/$(DEB)" CUTOVER_TEST_DEB="$(CURDIR)/$(TEST_DEB)"; \
	  $(GO) test -count=1 -timeout 75m ./test/ganeti/ >bin/ganeti-test.log 2>&1 & ganeti=$$!; \
	  echo "go test ./test/ganeti/ (beside the others; its output follows theirs)"; \
	  { $(MAKE) --no-print-directory lint && $(MAKE) --no-print-directory fuzz; } >bin/lint-fuzz.log 2>&1 & checks=$$!; \
	  echo "make lint fuzz (beside the tests; their output follows)"; \
	  rc=0; $(MAKE) --no-print-directory deb deb-testhooks || rc=$$?; \
	  [ $$rc != 0 ] || $(GO) test -count=1 -timeout 85m -parallel 4 $$($(GO) list ./... | grep -v '/test/ganeti$$' | grep -vxF "$$($(GO) list $(RACE_PKGS))") || rc=$$?; \
	  [ $$rc != 0 ] || $(MAKE) --no-print-directory race || rc=$$?; \
	  wait $$checks || rc=$$?; cat bin/lint-fuzz.log; \
	  wait $$ganeti || rc=$$?; cat bin/ganeti-test.log; exit $$rc

# The packages whose tests run cutover's own goroutines (connections, keepalives, fan-out,
# staging streams), under the race detector, about a minute and a half; make test runs them
# only here, after the other packages, not once more without it (the same tests, the same code: a
# second run cost the suite a minute). The crash-point and container tests run cutover as a
# separate program and gain nothing from it.
RACE_PKGS = ./nodes/... ./upgrade/... ./journal/... ./layout/... ./cfgupgrade/...
race:
	$(GO) test -race -count=1 -timeout 20m -parallel 4 $(RACE_PKGS)

# The crash-point test killing cutover and cutting the power at every crash point of every
# scenario (make test kills it at a spread of them, every stage's end and the first point of
# every kind; cuts the power at the same spread; and leaves out the power cut of the scenarios
# with the queue and reconciler flags set, whose file operations are the same as with them
# clear); then the
# container cluster's network faults (a cut both ways, one way, a held connection) at every
# stage boundary of an upgrade and every batch of a rolling one (make test runs a spread). The
# power cut mounts a small ext4 per point, so it needs root and loop devices.
crash-all: deps deb deb-testhooks images
	CUTOVER_CRASH_ALL=1 $(GO) test -count=1 -timeout 120m -run '^TestCrashPoints$$' -v ./cmd/cutover/
	CUTOVER_CRASH_ALL=1 CUTOVER_DEB="$(CURDIR)/$(DEB)" CUTOVER_TEST_DEB="$(CURDIR)/$(TEST_DEB)" \
	  $(GO) test -count=1 -timeout 120m -run '^TestNetworkFaultsAtBoundaries$$' -v ./test/e2e/

# The container images of the test clusters (the demo cluster's nodes and the Ganeti nodes),
# built side by side before the tests so that a first build, a few minutes of debootstrap, is
# not inside a test's time limit; each is cached by a hash of its inputs. Without a Docker
# engine the container tests skip, and so does this, except under CI=true, where they fail.
images:
	@if ! docker info >/dev/null 2>&1; then \
	  if [ "$$CI" = true ]; then echo "images: no Docker engine answers" >&2; exit 1; fi; \
	  echo "images: no Docker engine; the container tests will skip"; exit 0; fi; \
	  test/cluster/image/build.sh >/dev/null & node=$$!; \
	  test/ganeti/image/build.sh >/dev/null & ganeti=$$!; \
	  wait $$node; a=$$?; wait $$ganeti; b=$$?; [ $$a = 0 ] && [ $$b = 0 ] || exit 1; \
	  echo "images: $$(test/cluster/image/build.sh --tag) $$(test/ganeti/image/build.sh --tag)"

# Each fuzz target runs briefly on top of its seed corpus (which every `go test` runs).
# Minimizing a new input is bounded to 50 runs: the config parser's coverage differs a little
# from run to run for the same input, so nearly every input looks new, and the
# default of 60 s per input left FuzzParse with a handful of executions in its 10 s.
FUZZTIME ?= 10s
FUZZ_TARGETS = ./upgrade/config:FuzzParse ./nodes:FuzzParseNodeList ./upgrade/backup:FuzzVerify
# Go's fuzzer sometimes ends a run that found nothing with "context deadline exceeded" as its
# time runs out; such a run (no failing input written) is tried once more.
fuzz:
	@for t in $(FUZZ_TARGETS); do \
	  echo "fuzz $${t#*:} in $${t%%:*} for $(FUZZTIME)"; \
	  for try in 1 2; do \
	    out=$$($(GO) test -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 50x "$${t%%:*}" 2>&1) && { echo "$$out"; break; }; \
	    echo "$$out"; \
	    if [ $$try = 1 ] && echo "$$out" | grep -q 'context deadline exceeded' && ! echo "$$out" | grep -q 'Failing input written'; then \
	      echo "fuzz $${t#*:}: the fuzzer's own time-out, not a finding; once more"; continue; fi; \
	    exit 1; \
	  done; \
	done

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags release ./upgrade/ ./cmd/cutover/

# BENCH_NODES are the cluster sizes of the whole-run benchmark against pdsh.
BENCH_NODES ?= 8,32,64,128,256
# SYNC_NODES are the cluster sizes of the benchmark of what the syncs cost a whole run.
SYNC_NODES ?= 32,256
# make bench ends with one table of every figure with a target (test/benchtable); its raw
# output is in bin/bench.txt. make bench-ganeti runs the Ganeti comparison alone.
bench: deps
	@mkdir -p bin; rm -f bin/bench.failed; { \
	  $(GO) test -run '^$$' -bench . -benchtime 20x ./nodes/ || touch bin/bench.failed; \
	  CUTOVER_BENCH_NODES=$(BENCH_NODES) CUTOVER_BENCH_SYNC_NODES=$(SYNC_NODES) $(GO) test -run '^$$' -bench . -benchtime 1x -timeout 60m ./upgrade/ || touch bin/bench.failed; \
	  $(GO) test -run '^$$' -bench . -benchtime 1x -timeout 30m ./upgrade/staging/ || touch bin/bench.failed; \
	  $(GO) test -run '^$$' -bench . -benchtime 3x -timeout 90m ./test/ganeti/ || touch bin/bench.failed; \
	} 2>&1 | tee bin/bench.txt; $(GO) run ./test/benchtable < bin/bench.txt; test ! -e bin/bench.failed

bench-ganeti: deps deb deb-testhooks images
	@mkdir -p bin; rm -f bin/bench.failed; export CUTOVER_DEB="$(CURDIR)/$(DEB)" CUTOVER_TEST_DEB="$(CURDIR)/$(TEST_DEB)"; \
	  { $(GO) test -run '^$$' -bench . -benchtime 3x -timeout 90m -v ./test/ganeti/ || touch bin/bench.failed; } 2>&1 | tee bin/bench-ganeti.txt; \
	  $(GO) run ./test/benchtable < bin/bench-ganeti.txt; test ! -e bin/bench.failed

# The Ganeti reboot scenarios (and the node cut off among them) alone, ROUNDS rounds in a
# row on one cluster: a reboot scenario that passes only most of the time shows here. Run it
# on a quiet machine: Ganeti's own timeouts are short.
ROUNDS ?= 10
ganeti-reboots: deps images
	CUTOVER_GANETI_ROUNDS=$(ROUNDS) $(GO) test -count=1 -timeout 600m -v -run '^TestGaneti$$/^(reboot|node_cut)' ./test/ganeti/

# The demo and the test cluster by hand (test/cluster/clusterctl). NAME names the cluster,
# NODE a node (node1 is the master), CMD a shell command to run on it. BARE=1 starts the
# cluster without the demo application, for trying an application of your own (docs/guide.md,
# "Trying it in containers"); SRC and DST are what node-cp copies from this machine to NODE.
NAME       ?= cutover-demo
NODES      ?= 4
CLUSTERCTL  = $(GO) run ./test/cluster/clusterctl -name "$(NAME)"

.PHONY: cluster-up cluster-down cluster-status node-exec node-cp \
	node-reboot node-crash node-poweroff node-poweron node-cut node-heal

demo: deps deb
	NAME="$(NAME)" GO="$(GO)" CUTOVER_DEB="$(DEB)" test/demo.sh

# The rolling strategy on the demo cluster, under a client's load, against all at once.
demo-rolling: deps deb
	NAME="$(NAME)" GO="$(GO)" CUTOVER_DEB="$(DEB)" test/demo-rolling.sh

demo-down:
	$(CLUSTERCTL) down

# A fleet of three 2-node clusters upgraded to demoapp 1.2.0 by ansible-playbook with the fleet
# playbook (ansible/): pre-cached everywhere, a canary cluster first, then the waves, and the
# summary. The clusters are removed at the end; KEEP=1 keeps them.
.PHONY: demo-fleet
demo-fleet: deps deb
	GO="$(GO)" CUTOVER_DEB="$(DEB)" test/demo-fleet.sh

# A real Ganeti cluster (Debian's 3.0.2, 3.1 beside it), upgraded by cutover (test/ganeti).
GANETI_NAME ?= ganeti-demo-$(shell printf %s "$(CURDIR)" | cksum | cut -d" " -f1)

ganeti-demo: deps build
	GANETI_NAME="$(GANETI_NAME)" CUTOVER_BIN="$(BIN)" test/ganeti/demo.sh

ganeti-down:
	test/ganeti/ganeti-cluster "$(GANETI_NAME)" down

cluster-up: deps
	$(CLUSTERCTL) up -nodes "$(NODES)" $(if $(filter-out 0,$(BARE)),-bare)

cluster-down:
	$(CLUSTERCTL) down

cluster-status:
	$(CLUSTERCTL) status

node-reboot node-crash node-poweroff node-poweron node-cut node-heal:
	@test -n "$(NODE)" || { echo "usage: make $@ NODE=node2 [NAME=$(NAME)]" >&2; exit 2; }
	$(CLUSTERCTL) $(@:node-%=%) "$(NODE)"

# CMD reaches the node as typed: make does not expand the $(...) in it.
node-exec: export CLUSTER_CMD = $(value CMD)
node-exec:
	@test -n "$(NODE)" && test -n "$$CLUSTER_CMD" || { echo "usage: make $@ NODE=node1 CMD='...' [NAME=$(NAME)]" >&2; exit 2; }
	@$(CLUSTERCTL) exec "$(NODE)" "$$CLUSTER_CMD"

node-cp: export CLUSTER_SRC = $(value SRC)
node-cp: export CLUSTER_DST = $(value DST)
node-cp:
	@test -n "$(NODE)" && test -n "$$CLUSTER_SRC" && test -n "$$CLUSTER_DST" || { echo "usage: make $@ NODE=node1 SRC=FILE-OR-DIR DST=/PATH [NAME=$(NAME)]" >&2; exit 2; }
	@$(CLUSTERCTL) cp "$$CLUSTER_SRC" "$(NODE):$$CLUSTER_DST"
