# A small static image of headroom, for deploy/kubernetes (docs/KUBERNETES.md):
#
#   docker build -t headroom:dev .
#   docker build --build-arg VERSION=$(git describe --tags --always) -t registry.example/headroom:1.0 .
#
# The build stage compiles one static binary (no cgo: no libc needed at run
# time); the final stage is distroless "static": CA certificates, tzdata, a
# passwd with the nonroot user, and nothing else: no shell, no package manager.
# Base images are pinned by tag; pin them by digest (@sha256:...) for
# reproducible builds in your registry.
FROM golang:1.26-bookworm AS build
WORKDIR /src
# Modules first, so that a change to the source reuses this layer.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath \
      -ldflags "-s -w -X github.com/headroom-dev/headroom/cli.Version=${VERSION}" \
      -o /out/headroom ./cmd/headroom

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/headroom /headroom
# The manifests' runAsUser: nonroot's uid and gid in distroless.
USER 65532:65532
ENTRYPOINT ["/headroom"]
