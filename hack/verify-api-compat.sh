#!/usr/bin/env bash
# Fails when the API served at HEAD (api/openapi-spec/HEAD, kept current by
# `make update-openapi-spec` and checked by test/integration/openapispec)
# breaks clients of the newest frozen release (api/openapi-spec/vX.Y.Z):
# prints every breaking change with its path. A deliberate break is
# accepted by listing its exact line in hack/api-compat-allowed.list.
#
# It also compares HEAD's resource.k8s.io/v1, which standalone serves over
# our objects, with what Kubernetes itself serves there
# (api/openapi-spec/kubernetes, Kubernetes' own published document, copied
# by hack/update-upstream-fixtures.sh): upstream's clients must not see a
# break either. No allow-list applies to that one.
#
# SPEC_DIR overrides api/openapi-spec (the self-test uses it).
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SPEC_DIR="${SPEC_DIR:-${ROOT}/api/openapi-spec}"
ALLOW_LIST="${ALLOW_LIST:-${ROOT}/hack/api-compat-allowed.list}"
cd "${ROOT}"

newest="$(find "${SPEC_DIR}" -mindepth 1 -maxdepth 1 -type d -name 'v*' -printf '%f\n' | sort -V | tail -1)"
if [[ -z "${newest}" ]]; then
  echo "no frozen release under ${SPEC_DIR}: nothing to be compatible with"
  exit 0
fi
echo "checking ${SPEC_DIR}/HEAD against release ${newest}"
if ! go run ./hack/tools/apicompat -old "${SPEC_DIR}/${newest}" -new "${SPEC_DIR}/HEAD" -allow "${ALLOW_LIST}"; then
  cat >&2 <<MSG
HEAD breaks clients of ${newest} (lines above). Restore what the release
serves; or, when the break is deliberate and reviewed, add each line
(without "BREAKING: ") to hack/api-compat-allowed.list with a comment
saying why.
MSG
  exit 1
fi

echo "checking ${SPEC_DIR}/HEAD against Kubernetes' own resource.k8s.io/v1"
if ! go run ./hack/tools/apicompat -old "${SPEC_DIR}/kubernetes" -new "${SPEC_DIR}/HEAD" -old-without-enums; then
  cat >&2 <<MSG
HEAD's resource.k8s.io/v1 breaks clients of Kubernetes' own (lines above):
the served group must stay what upstream serves. Its schemas are
k8s.io/api's, so look at what changed in how they are served (paths,
subresources, kinds), or at a k8s.io/api upgrade without
hack/update-upstream-fixtures.sh.
MSG
  exit 1
fi
