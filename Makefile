# The module's test entry points.
#
#   make test         every test of the module under the race detector
#                     (test/integration and test/k8s included: they need
#                     root, HAProxy and the Kubernetes binaries), then every
#                     fuzz target briefly (3s each)
#   make fuzz         every fuzz target for FUZZTIME (default 60s), one after
#                     the other, then a table of time, execs and result per
#                     target; the list is in hack/fuzz.sh
#   make fuzz-short   the same for 5s each
#
# FUZZPARALLEL (default 1) is the number of fuzzing processes per target.

FUZZTIME ?= 60s
FUZZPARALLEL ?= 1

.PHONY: test fuzz fuzz-short

test:
	go test -race -count=1 -timeout 60m -v ./...
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
.PHONY: bench bench-smoke soak

bench:
	go run ./bench/rollout

bench-smoke:
	go run ./bench/rollout --smoke

# soak: 100 consecutive hapsuper drains per client pattern, live
# kube-proxy; writes bench/rollout/SOAK.md. ~45 minutes.
soak:
	go run ./bench/rollout -soak 100
