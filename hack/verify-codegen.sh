#!/usr/bin/env bash
# Fails when a generated file differs from what hack/update-codegen.sh
# would write now: regenerates in a copy of the tree and compares.
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
COPY="$(mktemp -d)"
trap 'rm -rf "${COPY}"' EXIT

tar -C "${ROOT}" --exclude=.git --exclude=_output -cf - . | tar -C "${COPY}" -xf -
"${COPY}/hack/update-codegen.sh" >/dev/null

status=0
for path in apis generated hack/api-rule-violations.list; do
  if ! diff -Nur "${ROOT}/${path}" "${COPY}/${path}"; then
    status=1
  fi
done
if [[ ${status} -ne 0 ]]; then
  echo "generated code is out of date: run hack/update-codegen.sh" >&2
  exit 1
fi
echo "generated code is up to date"
