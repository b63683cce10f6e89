# Sluice: the two commands a newcomer needs are `make run` and `make test`.
GO        ?= go
BIN       := bin/tenantd
PKGS      := ./...
TESTFLAGS ?= -count=1 -timeout 30m

.PHONY: all build run test test-short bench bench-micro bench-tools chaos lint fmt tools

all: build

build:
	$(GO) build -o $(BIN) ./tenantd

# Starts the control plane on a local Postgres (started privately if none
# answers), and prints the API URL and an operator credential.
run: build
	./$(BIN) dev

# The whole suite, against the real Postgres and Redis on loopback, with the
# real tools the tests drive (installed by `make tools`).
test: lint tools
	$(GO) test $(TESTFLAGS) $(PKGS)

# Installs what the tests need beyond Go: each script in .ci/tools.d installs
# one tool if it is missing (idempotent; cached under .cache/).
tools:
	@for s in .ci/tools.d/*.sh; do [ -e "$$s" ] || continue; bash "$$s" || exit 1; done

test-short:
	$(GO) test -short $(TESTFLAGS) $(PKGS)

# Sluice against NATS JetStream: a 3-broker cell of real tenantd processes
# and a 3-node JetStream cluster on loopback, both fsyncing before they
# acknowledge, the same workload on each (cmd/compare). Writes the
# results into docs/benchmarks.md ("Sluice vs NATS JetStream"). Needs the
# Postgres on 127.0.0.1:5432; takes about 5 minutes. BENCHFLAGS adds driver
# flags, e.g. BENCHFLAGS='-runs 5' (go run ./cmd/compare -h lists them).
bench: build bench-tools
	$(GO) run ./cmd/compare -tenantd $(BIN) -nats-server .cache/bin/nats-server \
	  -commit "$$(git describe --always --dirty 2>/dev/null || echo unknown)" -doc docs/benchmarks.md $(BENCHFLAGS)

# What only `make bench` needs (nats-server, built from source into
# .cache/bin): the scripts in .ci/bench.d, idempotent like .ci/tools.d's.
bench-tools:
	@for s in .ci/bench.d/*.sh; do [ -e "$$s" ] || continue; bash "$$s" || exit 1; done

# The Go micro-benchmarks of every package (go test -bench).
bench-micro:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

# A cell of real tenantd processes under faults (kills, pauses, restarts,
# Raft partitions) with a Jepsen-style checker; exits non-zero on any
# violation. CHAOSFLAGS e.g. "-duration 30m -seed 42" (go run ./cmd/chaos -h).
CHAOSFLAGS ?= -duration 10m
chaos: build
	$(GO) run ./cmd/chaos -tenantd $(BIN) $(CHAOSFLAGS)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

fmt:
	gofmt -w $$(git ls-files '*.go')
