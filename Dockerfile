# dra-apiserver for people who build with Docker (or Podman, Buildah):
#
#   docker build --build-arg VERSION=v0.1.0 -t REGISTRY/dra-apiserver:TAG .
#
# This file is not built by the tests: the machines the project is tested
# on have no Docker engine. `make image` builds the tested image (the same
# static binary, user 65532, the binary as entrypoint) without a daemon;
# hack/tools/image/image_test.go checks it.
ARG GO_VERSION=1.26

FROM golang:${GO_VERSION} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=v0.1.0-dev
ARG GIT_COMMIT=unknown
# Major and minor come from VERSION, as in the Makefile: the server
# compares them with each kind's lifecycle (deprecation, removal). The
# build tags are the Makefile's BUILD_TAGS.
RUN major="$(echo "${VERSION}" | sed -E 's/^v([0-9]+)\.([0-9]+).*/\1/')" && \
    minor="$(echo "${VERSION}" | sed -E 's/^v([0-9]+)\.([0-9]+).*/\2/')" && \
    CGO_ENABLED=0 go build -trimpath -tags fieldsv1string -o /out/dra-apiserver \
      -ldflags "-s -w \
        -X k8s.io/component-base/version.gitVersion=${VERSION} \
        -X k8s.io/component-base/version.gitMajor=${major} \
        -X k8s.io/component-base/version.gitMinor=${minor} \
        -X k8s.io/component-base/version.gitCommit=${GIT_COMMIT} \
        -X k8s.io/component-base/version.gitTreeState=clean" \
      ./cmd/dra-apiserver

# Static binary, no shell; "nonroot" is uid/gid 65532, as deploy/ expects.
FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=v0.1.0-dev
LABEL org.opencontainers.image.title="dra-apiserver" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="https://github.com/draplane/draplane"
COPY --from=build /out/dra-apiserver /usr/local/bin/dra-apiserver
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/dra-apiserver"]
