#!/usr/bin/env bash
# Proves hack/verify-codegen.sh can fail, in copies of the tree:
#   - a field added to a type of ours (hub and v1, as a real change would)
#     without regenerating must be refused as out of date;
#   - a field added to the hub and our versions of a type that upstream's
#     resource.k8s.io/v1 also has (k8s.io/api has no such field) must be
#     refused by name: resource.k8s.io clients would never see it.
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# run_case NAME TYPE EXPECTED FILE...: adds the field SelfTest to TYPE in
# each FILE of a fresh copy, runs verify-codegen.sh there and requires it
# to fail printing EXPECTED.
run_case() {
  local name="$1" type="$2" expected="$3"
  shift 3
  local copy
  copy="$(mktemp -d)"
  tar -C "${ROOT}" --exclude=.git --exclude=_output -cf - . | tar -C "${copy}" -xf -
  local files=()
  for f in "$@"; do
    files+=("${copy}/${f}")
  done
  python3 - "${type}" "${files[@]}" <<'PY'
import sys
kind = sys.argv[1]
for path in sys.argv[2:]:
    src = open(path).read()
    anchor = "type %s struct {\n" % kind
    assert anchor in src, "anchor not found in " + path
    src = src.replace(anchor, anchor + "\t// SelfTest is added by the codegen self-test.\n\t// +optional\n\tSelfTest *string `json:\"selfTest,omitempty\"`\n", 1)
    open(path, "w").write(src)
PY
  local status=0
  if "${copy}/hack/verify-codegen.sh" >"${copy}/verify.log" 2>&1; then
    echo "FAIL: ${name}: verify-codegen.sh passed" >&2
    status=1
  elif ! grep -qF -- "${expected}" "${copy}/verify.log"; then
    echo "FAIL: ${name}: verify-codegen.sh failed without printing \"${expected}\":" >&2
    grep -v '^E[0-9]' "${copy}/verify.log" | tail -20 >&2
    status=1
  else
    echo "ok: ${name}: $(grep -F -- "${expected}" "${copy}/verify.log" | head -1)"
  fi
  rm -rf "${copy}"
  return ${status}
}

run_case "a type of ours changed without regenerating" ResourcePoolClass \
  "generated code is out of date" \
  apis/resource/types.go apis/resource/v1/types.go
run_case "a field upstream's resource.k8s.io/v1 does not have" CELDeviceSelector \
  "field SelfTest of github.com/draplane/draplane/apis/resource.CELDeviceSelector has no counterpart in k8s.io/api/resource/v1" \
  apis/resource/types.go apis/resource/v1/types.go apis/resource/v1beta1/types.go
echo "ok: verify-codegen.sh rejects type changes that were not regenerated and fields upstream's API lacks"
