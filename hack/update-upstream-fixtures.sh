#!/usr/bin/env bash
# Copies upstream's wire fixtures of resource.k8s.io v1 and v1beta1 from
# the k8s.io/api module this repository requires into
# apis/resource/testdata/upstream/HEAD: the JSON ones with the group
# renamed to resource.draplane.dev, the protobuf ones as they are (their
# envelope keeps resource.k8s.io). TestUpstreamFixtures decodes each JSON
# one with our types and re-encodes it; TestUpstreamProtobufFixtures
# decodes each protobuf one with our types' protobuf code. The
# resource.k8s.io/v1 JSON ones also go, as they are, into
# apis/resource/testdata/upstream/resource.k8s.io: the server serves that
# group too, and apis/resource/upstreamv1 and test/integration/storagecompat
# read them through both groups.
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"

go mod download k8s.io/api
API_DIR="$(go list -m -f '{{.Dir}}' k8s.io/api)"
API_VERSION="$(go list -m -f '{{.Version}}' k8s.io/api)"
SRC="${API_DIR}/testdata/HEAD"
DST="${ROOT}/apis/resource/testdata/upstream/HEAD"
UPSTREAM_DST="${ROOT}/apis/resource/testdata/upstream/resource.k8s.io"

rm -rf "${DST}" "${UPSTREAM_DST}"
mkdir -p "${DST}" "${UPSTREAM_DST}"
for src in "${SRC}"/resource.k8s.io.v1.*.json; do
  install -m 0644 "${src}" "${UPSTREAM_DST}/"
done
echo "k8s.io/api ${API_VERSION}" >"${UPSTREAM_DST}/SOURCE"
for version in v1 v1beta1; do
  for src in "${SRC}"/resource.k8s.io."${version}".*.json; do
    name="$(basename "${src}")"
    sed 's|"apiVersion": "resource.k8s.io/|"apiVersion": "resource.draplane.dev/|' "${src}" \
      >"${DST}/${name/resource.k8s.io/resource.draplane.dev}"
  done
  for src in "${SRC}"/resource.k8s.io."${version}".*.pb; do
    name="$(basename "${src}")"
    install -m 0644 "${src}" "${DST}/${name/resource.k8s.io/resource.draplane.dev}"
  done
done
echo "k8s.io/api ${API_VERSION}" >"${DST}/SOURCE"
ls "${DST}"
