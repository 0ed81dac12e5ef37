#!/usr/bin/env bash
# Proves hack/verify-codegen.sh can fail: in a copy of the tree, adds a
# field to a type (hub, v1 and v1beta1, as a real change would) without regenerating
# and expects verify to refuse it.
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
COPY="$(mktemp -d)"
trap 'rm -rf "${COPY}"' EXIT
tar -C "${ROOT}" --exclude=.git --exclude=_output -cf - . | tar -C "${COPY}" -xf -

python3 - "${COPY}/apis/resource/types.go" "${COPY}/apis/resource/v1/types.go" "${COPY}/apis/resource/v1beta1/types.go" <<'PY'
import sys
for path in sys.argv[1:]:
    src = open(path).read()
    anchor = "type CELDeviceSelector struct {\n"
    assert anchor in src, "anchor not found in " + path
    src = src.replace(anchor, anchor + "\t// SelfTest is added by the codegen self-test.\n\t// +optional\n\tSelfTest *string `json:\"selfTest,omitempty\"`\n", 1)
    open(path, "w").write(src)
PY

if "${COPY}/hack/verify-codegen.sh" >"${COPY}/verify.log" 2>&1; then
  echo "FAIL: verify-codegen.sh passed although a field was added without regenerating" >&2
  exit 1
fi
if ! grep -q "generated code is out of date" "${COPY}/verify.log"; then
  echo "FAIL: verify-codegen.sh failed for another reason:" >&2
  tail -20 "${COPY}/verify.log" >&2
  exit 1
fi
echo "ok: verify-codegen.sh rejects a type change that was not regenerated"
