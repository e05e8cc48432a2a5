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
	$(GO) test -timeout 25m ./...

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

bench: deps
	$(GO) test -run '^$$' -bench . -benchtime 20x ./nodes/
