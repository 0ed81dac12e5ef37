#!/usr/bin/env bash
# Freezes the served API of a release: `make freeze-release VERSION=vX.Y.Z`.
#   - checks that the HEAD wire fixtures (apis/resource/testdata/HEAD) and
#     OpenAPI documents (api/openapi-spec/HEAD) match the code, and that
#     HEAD is compatible with the previous release (hack/verify-api-compat.sh);
#   - copies testdata/HEAD to apis/resource/testdata/vX.Y.Z and
#     api/openapi-spec/HEAD to api/openapi-spec/vX.Y.Z, never to be edited
#     again: the tests decode every frozen fixture and store it through
#     etcd, hack/verify-api-compat.sh compares HEAD with the newest release;
#   - empties the entries of hack/api-compat-allowed.list: the release now
#     carries the breaks they accepted.
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
VERSION="${1:-${VERSION:-}}"
if [[ ! "${VERSION}" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
  echo "usage: make freeze-release VERSION=vX.Y.Z (got \"${VERSION}\")" >&2
  exit 2
fi
fixtures="apis/resource/testdata"
specs="api/openapi-spec"
for dir in "${fixtures}/${VERSION}" "${specs}/${VERSION}"; do
  if [[ -e "${dir}" ]]; then
    echo "${dir} exists: ${VERSION} is frozen already" >&2
    exit 1
  fi
done

echo "checking that HEAD's fixtures and OpenAPI documents are current"
go test -count=1 ./apis/resource/ -run '^TestCompatibility$'
go test -count=1 ./test/integration/openapispec/ -run '^TestOpenAPISpec$'
hack/verify-api-compat.sh

cp -r "${fixtures}/HEAD" "${fixtures}/${VERSION}"
cp -r "${specs}/HEAD" "${specs}/${VERSION}"
sed -i '/^# Entries:$/q' hack/api-compat-allowed.list

echo "checking the frozen fixtures"
go test -count=1 ./apis/resource/ -run '^TestCompatibilityPreviousReleases$'
echo "froze ${VERSION}: ${fixtures}/${VERSION} and ${specs}/${VERSION}; commit them"
