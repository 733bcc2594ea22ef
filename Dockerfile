# syntax=docker/dockerfile:1
#
# hapsuper on the official HAProxy image: the same HAProxy, configuration path
# and user, with hapsuper as PID 1 in front of it. Build with
#
#   docker build -t hapsuper-haproxy --build-arg VERSION=$(git describe --tags) .
#
# test/image parses this file and runs its ENTRYPOINT + CMD against a real
# HAProxy: change them together.

# The official HAProxy image's tag. 3.4 is the official image's latest and
# lts (an LTS branch); pin an exact patch release so that a rebuild does not
# change HAProxy behind the operator's back, and raise it on purpose.
# hapsuper is tested against 2.6, 3.0, 3.2 and 3.4; for another LTS branch
# pass --build-arg HAPROXY_VERSION=3.2.x (3.2: 3.2.15 or later, see
# `hapsuper check`).
ARG HAPROXY_VERSION=3.4.8

# Build stage: the Go release that go.mod names, on the build machine's own
# platform; the binary is cross-compiled for the target platform below.
FROM --platform=$BUILDPLATFORM golang:1.26.8-bookworm AS build
WORKDIR /src
# Modules first: this layer stays cached until go.mod or go.sum change.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
ARG TARGETOS
ARG TARGETARCH
# Static (CGO_ENABLED=0): the binary does not depend on the final image's C
# library, so any haproxy image variant (Debian or Alpine) can carry it.
# -trimpath and -s -w: reproducible paths, no debug tables (smaller image);
# main.version is what `hapsuper version` prints.
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/hapsuper ./cmd/hapsuper

# The sidecar's image: hapsuper alone, for `hapsuper sidecar` beside an
# HAProxy container it does not run (docs/sidecar.md, deploy/components/
# sidecar). Build it with
#
#   docker build --target sidecar -t hapsuper-sidecar .
#
# The binary is static: nothing else is needed, no shell, no C library.
# It runs as uid and gid 99, the official haproxy image's user, so that both
# containers reach the sockets on the volume they share (the master CLI,
# mode 600, and the gate). The status socket is in that volume too:
# `kubectl exec <pod> -c hapsuper -- hapsuper status`.
FROM scratch AS sidecar
COPY --from=build /out/hapsuper /usr/local/bin/hapsuper
USER 99:99
ENTRYPOINT ["/usr/local/bin/hapsuper", "sidecar"]

# Final stage: the official image, untouched but for hapsuper.
FROM haproxy:${HAPROXY_VERSION}
COPY --from=build /out/hapsuper /usr/local/bin/hapsuper
# hapsuper's sockets and override file live in /var/run/hapsuper (conf's
# defaults). The base image ends as USER haproxy, which cannot create a
# directory under /var/run: create it as root, owned by haproxy, mode 0700
# (the master CLI there is admin level: only hapsuper and HAProxy may reach
# it). With readOnlyRootFilesystem, mount an emptyDir on /var/run/hapsuper.
USER root
RUN install -d -o haproxy -g haproxy -m 0700 /var/run/hapsuper
# Back to the base image's unprivileged user: hapsuper does not need root, and
# HAProxy runs as the same user it would run as without hapsuper.
USER haproxy
# The base image's stop signal, kept: hapsuper treats SIGUSR1 as a stop
# request (its default --stop-signals is SIGTERM,SIGUSR1), so `docker stop`
# and a kubelet honouring the image's STOPSIGNAL start a drain, as SIGTERM does.
STOPSIGNAL SIGUSR1
# hapsuper replaces the base image's docker-entrypoint.sh. Its settings come
# from HAPSUPER_* variables (see `hapsuper run -h`); everything after "--" is
# HAProxy's command, binary first: a CMD override must start with "haproxy".
ENTRYPOINT ["/usr/local/bin/hapsuper", "--"]
# The base image's CMD, kept: the configuration is where the official image's
# users already mount it. hapsuper adds -W, -db, -S and its override file.
CMD ["haproxy", "-f", "/usr/local/etc/haproxy/haproxy.cfg"]
