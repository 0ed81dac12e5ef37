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

# Kubernetes' own OpenAPI document of resource.k8s.io/v1, from the
# k8s.io/kubernetes module of the same minor (the module proxy refuses
# some patch releases' zips; KUBERNETES_VERSION picks another), and a
# served.json for it: hack/verify-api-compat.sh requires the
# resource.k8s.io/v1 we serve not to break it.
KUBERNETES_VERSION="${KUBERNETES_VERSION:-v1.37.1}"
KUBE_DIR="$(cd "$(mktemp -d)" && go mod download -json "k8s.io/kubernetes@${KUBERNETES_VERSION}" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')"
SPEC_DST="${ROOT}/api/openapi-spec/kubernetes"
rm -rf "${SPEC_DST}"
mkdir -p "${SPEC_DST}"
install -m 0644 "${KUBE_DIR}/api/openapi-spec/v3/apis__resource.k8s.io__v1_openapi.json" "${SPEC_DST}/"
cat >"${SPEC_DST}/served.json" <<JSON
{
  "resource.k8s.io/v1": {
    "DeviceClass": {"resource": "deviceclasses"},
    "DeviceTaintRule": {"resource": "devicetaintrules"},
    "ResourceClaim": {"resource": "resourceclaims"},
    "ResourceClaimTemplate": {"resource": "resourceclaimtemplates"},
    "ResourceSlice": {"resource": "resourceslices"}
  }
}
JSON
echo "k8s.io/kubernetes ${KUBERNETES_VERSION}: api/openapi-spec/v3/apis__resource.k8s.io__v1_openapi.json" >"${SPEC_DST}/SOURCE"
ls "${SPEC_DST}"
