# Weir's vocabulary: make build test bench lint.
GO        ?= go
BIN       := bin
PKGS      := ./...
STATICCHECK_VERSION := v0.8.2
PROTOC_GEN_GO_VERSION := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.2
TOOLS     := $(CURDIR)/.cache/bin
PROTOS    := $(shell find proto -name '*.proto')

.PHONY: help all run run-multidc run-cluster chaos demo demo-wan sim sim-all build test test-short bench bench-limiter bench-envoy lint fmt vet staticcheck ensure-redis ensure-chromium clean proto proto-check proto-tools

all: lint test build

## help: list the targets with what each does
help:
	@awk -F': ' '/^## [a-z-]+: /{sub(/^## /,""); t=$$1; sub(/^[^:]*: /,""); printf "  %-14s %s\n", t, $$0}' $(MAKEFILE_LIST)

## build: compile every package and the commands into ./bin
build:
	$(GO) build $(PKGS)
	@if ls cmd/*/main.go >/dev/null 2>&1; then mkdir -p $(BIN) && $(GO) build -o $(BIN)/ ./cmd/...; fi

## test: every test, with the race detector, against real redis-server (and headless chromium for the console)
test: ensure-redis ensure-chromium
	$(GO) test -race -count=1 -timeout 15m $(PKGS)

## test-short: the fast subset (no Redis process, no fuzzing)
test-short:
	$(GO) test -short -count=1 $(PKGS)

## run: one limiter with the in-memory store and the example rules
run:
	$(GO) run ./cmd/limiter --dc local --rules deploy/multidc/rules.yaml --log-format text

## demo: the default scenario on three simulated DCs, with a live table, the operators' console (its URL and token printed) and a report (Markdown + SVG)
demo:
	$(GO) run ./cmd/weirsim --scenario deploy/multidc/scenarios/default.yaml --live --console 127.0.0.1:0 --out report/default

## sim: one scenario, SCENARIO=file; exits non-zero when a goal is missed
SCENARIO ?= deploy/multidc/scenarios/default.yaml
sim:
	$(GO) run ./cmd/weirsim --scenario $(SCENARIO) --out report/$(basename $(notdir $(SCENARIO)))

## sim-all: every shipped scenario, two at a time (SIM_JOBS); fails when any misses a goal (about 7 minutes)
sim-all: ensure-redis
	@scripts/sim-all.sh

## run-multidc: three DCs, two coordinators, embedded etcd and Kafka broker, on loopback
run-multidc:
	scripts/run-multidc.sh

## run-cluster: the production topology as separate processes on loopback: 3-member etcd, 3 Kafka brokers, 2 coordinators, 2 DCs x 2 limiters, a Redis Cluster
run-cluster:
	scripts/run-cluster.sh

## chaos: kill and restart each kind of process of a running `make run-cluster`, under traffic, and print takeover and recovery times
chaos:
	scripts/chaos.sh

## bench: the benchmarks of the algorithms and the stores
bench: ensure-redis
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 1s ./pkg/algorithm ./pkg/store/memstore
	$(GO) test -run '^$$' -bench 'RedisDecide' -benchtime 1s ./pkg/store/redisstore
	$(GO) test -run '^$$' -bench 'RedisMemory' -benchtime 1x ./pkg/store/redisstore
	$(GO) test -run '^$$' -bench 'CheckRedis' -benchtime 40000x -count 3 ./pkg/limiter

## bench-limiter: load the limiter over gRPC (weirload), with Redis; about a minute
bench-limiter:
	scripts/bench-limiter.sh

## bench-envoy: Envoy's API and weir.v1 at closed-loop peak and paced at two rates, with the gRPC health floor; about three minutes
bench-envoy:
	scripts/bench-envoy.sh

## lint: formatting, go vet and staticcheck
lint: fmt vet staticcheck

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

staticcheck:
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) $(PKGS)

## proto: regenerate the committed Go code from proto/ (needs protoc and its well-known types: apt-get install protobuf-compiler libprotobuf-dev)
proto: proto-tools
	PATH=$(TOOLS):$$PATH protoc -I proto \
		--go_out=proto --go_opt=paths=source_relative \
		--go-grpc_out=proto --go-grpc_opt=paths=source_relative \
		$(PROTOS)

## proto-check: fail when the committed generated code is stale
proto-check: proto
	@git diff --exit-code -- proto || { echo "generated code in proto/ is stale: run make proto and commit"; exit 1; }
	@test -z "$$(git ls-files --others --exclude-standard -- proto)" || { echo "make proto created files that are not committed:"; git ls-files --others --exclude-standard -- proto; exit 1; }

proto-tools:
	@mkdir -p $(TOOLS)
	@test -x $(TOOLS)/protoc-gen-go || GOBIN=$(TOOLS) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	@test -x $(TOOLS)/protoc-gen-go-grpc || GOBIN=$(TOOLS) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)

ensure-redis:
	@scripts/ensure-redis.sh

ensure-chromium:
	@scripts/ensure-chromium.sh

clean:
	rm -rf $(BIN)

## demo-wan: the default scenario with every DC in its own network namespace behind a 40 ms emulated WAN (root; WAN_DELAY=40ms)
WAN_DELAY ?= 40ms
demo-wan:
	$(GO) run ./cmd/weirsim --scenario deploy/multidc/scenarios/default.yaml --wan --wan-delay $(WAN_DELAY) --live --out report/default-wan
