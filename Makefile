# The README's commands. Every target works on a fresh machine with only Go:
# the targets that need redis-server (and a C compiler, for the clock faults;
# PostgreSQL, for the fenced writes' tests) install them first with the
# system's package manager, saying what they run, or stop with the command
# to run (scripts/ensure-redis.sh; REDLOCK_NO_INSTALL=1 only says it).

GO          ?= go
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
GOIMPORTS   ?= $(GO) run golang.org/x/tools/cmd/goimports@v0.52.0 -local github.com/quorumlock/redlock
CODECHECK   ?= $(GO) run ./scripts/codecheck
MODULES     := . ./integration ./bench ./redlockotel ./examples/fenced-postgres
DURATION    ?= 10m

.PHONY: redis cc postgres quickstart test test-lib test-integration test-bench test-otel test-examples bench bench-quick chaos lint fmt

## redis: install redis-server unless it is on PATH.
redis:
	@sh scripts/ensure-redis.sh redis-server

## cc: install a C compiler unless cc is on PATH.
cc:
	@sh scripts/ensure-redis.sh cc

## postgres: install PostgreSQL's server unless initdb is found.
postgres:
	@sh scripts/ensure-redis.sh postgres

## quickstart: the README's quick start against three local redis-server
## processes that it starts, and stops at the end.
quickstart: redis
	$(GO) run ./examples/quickstart

## test: the whole default suite, with -race: library, integration (short
## chaos runs), bench harness (short), OpenTelemetry adapter, and the
## examples that are modules of their own (they import a database driver).
## Every suite runs even when an earlier one failed; the target fails at
## the end, naming the suites that failed.
SUITES := lib integration bench otel examples
test: redis cc
	@failed=; for s in $(SUITES); do \
		echo "== make test-$$s"; \
		$(MAKE) --no-print-directory test-$$s || failed="$$failed test-$$s"; \
	done; \
	if [ -n "$$failed" ]; then echo "make test: FAILED:$$failed"; exit 1; fi; \
	echo "make test: all $(words $(SUITES)) suites passed"

test-lib: redis cc
	$(GO) test -race -count=1 ./...

test-integration: redis cc postgres
	@if [ -f integration/go.mod ]; then cd integration && $(GO) test -race -count=1 ./...; fi

test-bench: redis
	@if [ -f bench/go.mod ]; then cd bench && $(GO) test -race -count=1 ./...; fi

test-otel: redis
	@if [ -f redlockotel/go.mod ]; then cd redlockotel && $(GO) test -race -count=1 ./...; fi

test-examples: redis postgres
	@if [ -f examples/fenced-postgres/go.mod ]; then cd examples/fenced-postgres && $(GO) test -race -count=1 ./...; fi

## bench: the benchmark harness; starts its own redis-server processes.
bench: redis
	cd bench && $(GO) run . $(BENCHFLAGS)

## bench-quick: the harness in under a minute (CI runs it so it cannot rot).
bench-quick: redis
	cd bench && $(GO) run . -quick

## chaos: a long chaos run, DURATION=10m by default, at a high rate: many
## keys, short holds, client processes, and no -race (the short runs in
## `make test` keep it). CHAOSFLAGS overrides the rate settings; add
## -chaos.seed=S to replay a run.
CHAOSFLAGS ?= -chaos.keys=128 -chaos.maxhold=3ms -chaos.longholds=0.02 -chaos.clients=2 -chaos.goroutines=32 -chaos.processes=2
chaos: redis cc
	cd integration && $(GO) test -count=1 -run 'TestChaos' -timeout 0 -v ./... -args -chaos.duration=$(DURATION) $(CHAOSFLAGS)

## lint: gofmt; imports grouped standard library / third party / this
## repository (codecheck imports, then goimports -local); no test that
## cannot fail (codecheck asserts); no library function (redlock/, quorum/,
## clock/) over 60 lines or 6 parameters (codecheck funcs); go vet and
## staticcheck in every module.
## `make fmt` fixes what the first two report.
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed (make fmt):"; echo "$$out"; exit 1; fi
	@$(CODECHECK) imports $$(git ls-files '*.go') || { echo "imports out of order: make fmt"; exit 1; }
	@out=$$($(GOIMPORTS) -l $$(git ls-files '*.go')) || exit 1; if [ -n "$$out" ]; then echo "goimports needed (make fmt):"; echo "$$out"; exit 1; fi
	@$(CODECHECK) asserts $$(git ls-files '*_test.go')
	@$(CODECHECK) funcs $$(git ls-files 'redlock/*.go' 'quorum/*.go' 'clock/*.go')
	@for m in $(MODULES); do [ -f $$m/go.mod ] || continue; echo "vet+staticcheck $$m"; (cd $$m && $(GO) vet ./... && $(STATICCHECK) ./...) || exit 1; done

## fmt: gofmt, then imports regrouped and sorted (codecheck imports -w,
## goimports -local).
fmt:
	gofmt -w $$(git ls-files '*.go')
	$(CODECHECK) imports -w $$(git ls-files '*.go')
	$(GOIMPORTS) -w $$(git ls-files '*.go')
