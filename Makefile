# The README's commands. Every target works on a fresh machine with Go and
# redis-server installed (`apt-get install -y redis-server`).

GO          ?= go
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
MODULES     := . ./integration ./bench ./redlockotel
DURATION    ?= 10m

.PHONY: test test-lib test-integration test-bench test-otel bench bench-quick chaos lint fmt

## test: the whole default suite, with -race: library, integration (short
## chaos runs), bench harness (short), OpenTelemetry adapter.
test: test-lib test-integration test-bench test-otel

test-lib:
	$(GO) test -race -count=1 ./...

test-integration:
	@if [ -f integration/go.mod ]; then cd integration && $(GO) test -race -count=1 ./...; fi

test-bench:
	@if [ -f bench/go.mod ]; then cd bench && $(GO) test -race -count=1 ./...; fi

test-otel:
	@if [ -f redlockotel/go.mod ]; then cd redlockotel && $(GO) test -race -count=1 ./...; fi

## bench: the benchmark harness; starts its own redis-server processes.
bench:
	cd bench && $(GO) run . $(BENCHFLAGS)

## bench-quick: the harness in under a minute (CI runs it so it cannot rot).
bench-quick:
	cd bench && $(GO) run . -quick

## chaos: a long chaos run, DURATION=10m by default, at a high rate: many
## keys, short holds, client processes, and no -race (the short runs in
## `make test` keep it). CHAOSFLAGS overrides the rate settings; add
## -chaos.seed=S to replay a run.
CHAOSFLAGS ?= -chaos.keys=128 -chaos.maxhold=3ms -chaos.longholds=0.02 -chaos.clients=2 -chaos.goroutines=32 -chaos.processes=2
chaos:
	cd integration && $(GO) test -count=1 -run 'TestChaos' -timeout 0 -v ./... -args -chaos.duration=$(DURATION) $(CHAOSFLAGS)

## lint: gofmt, go vet and staticcheck in every module.
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@for m in $(MODULES); do [ -f $$m/go.mod ] || continue; echo "vet+staticcheck $$m"; (cd $$m && $(GO) vet ./... && $(STATICCHECK) ./...) || exit 1; done

fmt:
	gofmt -w $$(git ls-files '*.go')
