# Weir's vocabulary: make build test bench lint.
GO        ?= go
BIN       := bin
PKGS      := ./...
STATICCHECK_VERSION := v0.8.2

.PHONY: all build test test-short bench lint fmt vet staticcheck ensure-redis clean

all: lint test build

## build: compile every package and the commands into ./bin
build:
	$(GO) build $(PKGS)
	@if ls cmd/*/main.go >/dev/null 2>&1; then mkdir -p $(BIN) && $(GO) build -o $(BIN)/ ./cmd/...; fi

## test: every test, with the race detector, against real redis-server
test: ensure-redis
	$(GO) test -race -count=1 -timeout 15m $(PKGS)

## test-short: the fast subset (no Redis process, no fuzzing)
test-short:
	$(GO) test -short -count=1 $(PKGS)

## bench: the benchmarks of the algorithms and the stores
bench: ensure-redis
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 1s ./pkg/algorithm ./pkg/memstore
	$(GO) test -run '^$$' -bench 'RedisMemory|RedisDecide' -benchtime 1s ./pkg/redisstore

## lint: formatting, go vet and staticcheck
lint: fmt vet staticcheck

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

staticcheck:
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) $(PKGS)

ensure-redis:
	@scripts/ensure-redis.sh

clean:
	rm -rf $(BIN)
