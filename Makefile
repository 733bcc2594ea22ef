# The entry points.
#
#   make build        the binary, ./bin/hapsuper (VERSION=… names it; the
#                     commit comes from git); `go install ./cmd/hapsuper`
#                     puts it in $GOBIN instead
#   make test         hack/setup.sh (as root: the packages, the Kubernetes
#                     binaries, the HAProxy roots and the image, each made
#                     once per machine), then every test of every module
#                     under the race detector:
#                     the product (.), test/ (integration, k8s, image,
#                     manifests, scripts: root, HAProxy and the Kubernetes
#                     binaries) and bench/ (the rollout smoke run); then
#                     every fuzz target briefly (3s each)
#   make fuzz         every fuzz target for FUZZTIME (default 60s), one after
#                     the other, then a table of time, execs and result per
#                     target; the list is in hack/fuzz.sh
#   make fuzz-short   the same for 5s each
#
# FUZZPARALLEL (default 1) is the number of fuzzing processes per target.

FUZZTIME ?= 60s
FUZZPARALLEL ?= 1
VERSION ?=

.PHONY: build test fuzz fuzz-short

# build says what it builds first, then a line per 25 packages compiled (a
# first build compiles the Kubernetes client: minutes on a small machine),
# go's errors as they come, and exits with go build's code.
build:
	@echo "make build: go build -o bin/hapsuper ./cmd/hapsuper (static, -trimpath); a first build compiles ~400 packages, minutes on a small machine, later ones take seconds"
	@{ CGO_ENABLED=0 go build -v -buildvcs=true -trimpath -ldflags "-s -w$(if $(VERSION), -X main.version=$(VERSION))" -o bin/hapsuper ./cmd/hapsuper 2>&1; echo "go build exit $$?"; } | \
		while IFS= read -r l; do case "$$l" in "go build exit "*) exit "$${l##* }";; *[\ :]*) echo "$$l";; *) n=$$((n + 1)); [ $$((n % 25)) -ne 0 ] || echo "  $$n packages compiled";; esac; done
	@./bin/hapsuper version

# The modules whose tests make test runs (tools/k8s has none).
MODULES = . test bench

test:
	bash hack/setup.sh
	@rc=0; for m in $(MODULES); do echo "== go test in module $$m"; (cd $$m && go test -race -count=1 -timeout 60m -v ./...) || rc=1; done; exit $$rc
	FUZZTIME=3s FUZZPARALLEL=$(FUZZPARALLEL) hack/fuzz.sh

fuzz:
	FUZZTIME=$(FUZZTIME) FUZZPARALLEL=$(FUZZPARALLEL) hack/fuzz.sh

fuzz-short:
	$(MAKE) fuzz FUZZTIME=5s

# The rollout benchmark (bench/rollout; root, HAProxy, wrk and the
# Kubernetes test binaries): hapsuper against immediate, preStop sleep and
# quiet-period stops through real kube-proxy, req/s, RSS, the kube-proxy
# confirmation fan-out and the EndpointSlice scale check; writes
# bench/rollout/RESULTS.md and docs/rollout-timeline.svg. ~15 minutes.
# bench-smoke: quiet + hapsuper, one client pattern, ~1 minute.
.PHONY: bench bench-smoke soak campaign balancer

bench:
	cd bench && go run ./rollout

bench-smoke:
	cd bench && go run ./rollout --smoke

# soak: 100 consecutive hapsuper drains per client pattern, live
# kube-proxy; writes bench/rollout/SOAK.md. ~45 minutes.
soak:
	cd bench && go run ./rollout -soak 100

# campaign: CAMPAIGN_DRAINS (default 1000) hapsuper drains with random,
# seeded faults (kube-proxy frozen, restarted, its healthz filtered, the
# apiserver frozen, a reload) over the client patterns; writes
# bench/rollout/CAMPAIGN.md with the seed of every drain that failed a
# request or claimed too much. ~7 s a drain. SEED= replays a campaign.
CAMPAIGN_DRAINS ?= 1000
campaign:
	cd bench && go run ./rollout -campaign $(CAMPAIGN_DRAINS)$(if $(SEED), -seed $(SEED))

# balancer: the rollouts behind a health-checking load balancer
# (externalTrafficPolicy Local) alone; writes bench/rollout/BALANCER.md.
# ~4 minutes.
balancer:
	cd bench && go run ./rollout -balancer-only
