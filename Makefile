# cutover's build, test and demo entry points. `make test` is the one test command: unit tests,
# real-sshd integration tests and the container end-to-end tests.
GO      ?= go
BIN     := bin/cutover
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)

.PHONY: build test lint deps bench demo demo-down

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/cutover

deps:
	@test/setup.sh

test: deps lint
	$(GO) test -count=1 -timeout 25m -parallel 4 ./...

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

bench: deps
	$(GO) test -run '^$$' -bench . -benchtime 20x ./nodes/
	$(GO) test -run '^$$' -bench . -benchtime 3x -timeout 30m ./upgrade/

# The demo and the test cluster by hand (test/cluster/clusterctl). NAME names the cluster,
# NODE a node (node1 is the master), CMD a shell command to run on it.
NAME       ?= cutover-demo
NODES      ?= 4
CLUSTERCTL  = $(GO) run ./test/cluster/clusterctl -name "$(NAME)"

.PHONY: cluster-up cluster-down cluster-status node-exec \
	node-reboot node-crash node-poweroff node-poweron node-cut node-heal

demo: deps build
	NAME="$(NAME)" GO="$(GO)" CUTOVER_BIN="$(BIN)" test/demo.sh

demo-down:
	$(CLUSTERCTL) down

cluster-up: deps
	$(CLUSTERCTL) up -nodes "$(NODES)"

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
