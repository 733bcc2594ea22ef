# The module's test entry points.
#
#   make test         every test of the module (test/integration and test/k8s
#                     included: they need HAProxy and the Kubernetes binaries)
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
	go test -count=1 -timeout 40m -v ./...

fuzz:
	FUZZTIME=$(FUZZTIME) FUZZPARALLEL=$(FUZZPARALLEL) hack/fuzz.sh

fuzz-short:
	$(MAKE) fuzz FUZZTIME=5s
