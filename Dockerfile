# Weir's image: the regional limiter and the coordinator, statically linked,
# on a small Alpine base (Alpine rather than distroless so that compose
# health checks can call busybox wget). The entrypoint is the limiter; run
# the coordinator by overriding it (deploy/multidc/docker-compose.yml does):
#
#   docker build -t weir:dev .
#   docker run --rm weir:dev --help
#   docker run --rm --entrypoint /usr/local/bin/coordinator weir:dev --help
#
# Every flag is also an environment variable (--etcd is WEIR_ETCD).
# Plain Dockerfile syntax on purpose: it builds with BuildKit and with the
# classic builder of older docker-compose alike.

ARG GO_VERSION=1.26.8
ARG ALPINE_VERSION=3.24.1

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
ENV CGO_ENABLED=0
# Modules first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN go build -trimpath -ldflags="-s -w" -o /out/ ./cmd/limiter ./cmd/coordinator

FROM alpine:${ALPINE_VERSION}
RUN addgroup -S -g 10001 weir && adduser -S -D -H -u 10001 -G weir weir
COPY --from=build /out/limiter /out/coordinator /usr/local/bin/
USER 10001:10001
# limiter HTTP and gRPC; coordinator admin
EXPOSE 8080 9090 8070
ENTRYPOINT ["/usr/local/bin/limiter"]
