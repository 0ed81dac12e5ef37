#!/usr/bin/env bash
# Proves hack/verify-api-compat.sh can fail: for each class of breaking
# change, a copy of api/openapi-spec gets one mutation of HEAD (and, where
# the class needs a bound the served API does not have yet, the same field
# of the release gets it first) and the check must fail naming the change
# at its path. An addition must pass, and so must a break whose line is in
# the allow-list. Last, one change goes the whole way from the Go types
# through code generation and the served document (about a minute).
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${ROOT}"
WORK="$(mktemp -d)"
trap 'rm -rf "${WORK}"' EXIT

release="$(find api/openapi-spec -mindepth 1 -maxdepth 1 -type d -name 'v*' -printf '%f\n' | sort -V | tail -1)"
if [[ -z "${release}" ]]; then
  echo "FAIL: no frozen release under api/openapi-spec to test against" >&2
  exit 1
fi
# Build the checker once; verify-api-compat.sh would `go run` it each time.
go build -o "${WORK}/apicompat" ./hack/tools/apicompat

# mutate CASE DIR: applies one change to the copy of api/openapi-spec in DIR.
mutate() {
  python3 - "$1" "$2" "${release}" <<'PY'
import json, os, sys
case, root, release = sys.argv[1], sys.argv[2], sys.argv[3]
G = "resource.draplane.dev"
P = "com.github.draplane.draplane.apis.resource.v1."

def path(rel, gv):
    return os.path.join(root, rel, "apis__" + gv.replace("/", "__") + "_openapi.json")

def load(rel, gv="resource.draplane.dev/v1"):
    return json.load(open(path(rel, gv)))

def save(doc, rel, gv="resource.draplane.dev/v1"):
    json.dump(doc, open(path(rel, gv), "w"), indent=2, sort_keys=True)

def served(rel):
    return json.load(open(os.path.join(root, rel, "served.json")))

def save_served(s, rel):
    json.dump(s, open(os.path.join(root, rel, "served.json"), "w"), indent=2, sort_keys=True)

def field(doc, schema, name):
    return doc["components"]["schemas"][P + schema]["properties"][name]

def both(fn):
    """Applies fn to the release first (the bound it then tightens), then HEAD."""
    for rel, value in ((release, 0), ("HEAD", 1)):
        doc = load(rel)
        fn(doc, value)
        save(doc, rel)

head = load("HEAD")
if case == "field-removed":
    del head["components"]["schemas"][P + "DeviceRequest"]["properties"]["firstAvailable"]
elif case == "field-renamed":
    props = head["components"]["schemas"][P + "ExactDeviceRequest"]["properties"]
    props["className"] = props.pop("deviceClassName")
elif case == "type-changed":
    field(head, "ExactDeviceRequest", "count")["type"] = "string"
    del field(head, "ExactDeviceRequest", "count")["format"]
elif case == "format-changed":
    field(head, "ExactDeviceRequest", "count")["format"] = "int32"
elif case == "enum-value-removed":
    field(head, "DeviceToleration", "operator")["enum"] = ["Exists"]
elif case == "optional-made-required":
    s = head["components"]["schemas"][P + "ExactDeviceRequest"]
    s["required"] = sorted(set(s.get("required", [])) | {"count"})
elif case == "list-type-changed":
    field(head, "DeviceClaim", "requests")["x-kubernetes-list-type"] = "set"
elif case == "list-map-keys-changed":
    field(head, "ResourceClaimStatus", "reservedFor")["x-kubernetes-list-map-keys"] = ["uid", "name"]
elif case == "default-changed":
    field(head, "ExactDeviceRequest", "deviceClassName")["default"] = "gpu"
elif case == "operation-removed":
    del head["paths"]["/apis/resource.draplane.dev/v1/namespaces/{namespace}/resourceclaims/{name}"]["delete"]
elif case == "maxItems-lowered":
    both(lambda doc, i: field(doc, "DeviceClaim", "requests").update(maxItems=[32, 16][i]))
elif case == "maxLength-lowered":
    both(lambda doc, i: field(doc, "ExactDeviceRequest", "deviceClassName").update(maxLength=[253, 63][i]))
elif case == "maximum-lowered":
    both(lambda doc, i: field(doc, "ExactDeviceRequest", "count").update(maximum=[128, 64][i]))
elif case == "minimum-raised":
    both(lambda doc, i: field(doc, "ExactDeviceRequest", "count").update(minimum=[0, 1][i]))
elif case == "pattern-added":
    field(head, "ExactDeviceRequest", "deviceClassName")["pattern"] = "^[a-z0-9.-]+$"
elif case == "pattern-changed":
    both(lambda doc, i: field(doc, "ExactDeviceRequest", "deviceClassName").update(pattern=["^[a-z0-9.-]+$", "^[a-z0-9-]+$"][i]))
elif case == "kind-removed":
    s = served("HEAD")
    del s[G + "/v1"]["DeviceTaintRule"]
    save_served(s, "HEAD")
elif case == "version-removed":
    s = served("HEAD")
    del s[G + "/v1"]
    save_served(s, "HEAD")
    os.remove(path("HEAD", G + "/v1"))
elif case == "deprecated-version-removed-early":
    s = served("HEAD")
    del s[G + "/v1beta1"]
    save_served(s, "HEAD")
    os.remove(path("HEAD", G + "/v1beta1"))
elif case == "upstream-field-removed":
    gv = "resource.k8s.io/v1"
    doc = load("HEAD", gv)
    del doc["components"]["schemas"]["io.k8s.api.resource.v1.ExactDeviceRequest"]["properties"]["adminAccess"]
    save(doc, "HEAD", gv)
elif case == "upstream-kind-removed":
    s = served("HEAD")
    del s["resource.k8s.io/v1"]["DeviceTaintRule"]
    save_served(s, "HEAD")
elif case in ("addition", "allowed-break"):
    props = head["components"]["schemas"][P + "ExactDeviceRequest"]["properties"]
    if case == "addition":
        props["priority"] = {"type": "integer", "format": "int32", "description": "added by the self-test"}
        head["components"]["schemas"][P + "DeviceToleration"]["properties"]["operator"]["enum"].append("Lt")
        s = served("HEAD")
        s[G + "/v1"]["DeviceWidget"] = {"resource": "devicewidgets"}
        save_served(s, "HEAD")
    else:
        del props["adminAccess"]
else:
    sys.exit("unknown case " + case)
if case not in ("upstream-field-removed", "upstream-kind-removed", "maxItems-lowered", "maxLength-lowered", "maximum-lowered", "minimum-raised", "pattern-changed",
                "kind-removed", "version-removed", "deprecated-version-removed-early"):
    save(head, "HEAD")
PY
}

# check CASE [EXPECTED]: with EXPECTED the check must fail and print it,
# without it the check must pass.
failures=0
check() {
  local case="$1" expected="${2:-}"
  local dir="${WORK}/${case}"
  mkdir -p "${dir}"
  cp -r api/openapi-spec "${dir}/spec"
  : >"${dir}/allowed.list"
  mutate "${case}" "${dir}/spec"
  if [[ "${case}" == "allowed-break" ]]; then
    # The documented way to accept a break: its exact lines, reviewed.
    "${WORK}/apicompat" -old "${dir}/spec/${release}" -new "${dir}/spec/HEAD" >"${dir}/breaks.log" || true
    sed -n 's/^BREAKING: //p' "${dir}/breaks.log" >"${dir}/breaks"
    if [[ ! -s "${dir}/breaks" ]]; then
      echo "FAIL: ${case}: removing a field was not reported" >&2
      failures=$((failures + 1))
      return
    fi
    { echo "# accepted by the self-test"; cat "${dir}/breaks"; } >"${dir}/allowed.list"
  fi
  local status=0
  SPEC_DIR="${dir}/spec" ALLOW_LIST="${dir}/allowed.list" hack/verify-api-compat.sh >"${dir}/log" 2>&1 || status=$?
  if [[ -z "${expected}" ]]; then
    if [[ ${status} -ne 0 ]]; then
      echo "FAIL: ${case}: the check failed on a compatible change:" >&2
      cat "${dir}/log" >&2
      failures=$((failures + 1))
    else
      echo "ok: ${case} passes"
    fi
    return
  fi
  if [[ ${status} -eq 0 ]]; then
    echo "FAIL: ${case}: the check passed" >&2
    failures=$((failures + 1))
  elif ! grep -qF -- "${expected}" "${dir}/log"; then
    echo "FAIL: ${case}: the check failed without reporting \"${expected}\":" >&2
    cat "${dir}/log" >&2
    failures=$((failures + 1))
  else
    echo "ok: ${case} fails: $(grep -F -- "${expected}" "${dir}/log" | head -1)"
  fi
}

V1="resource.draplane.dev/v1"
check field-removed "BREAKING: ${V1} ResourceClaim spec.devices.requests[].firstAvailable: field removed (or renamed)"
check field-renamed "BREAKING: ${V1} ResourceClaim spec.devices.requests[].exactly.deviceClassName: field removed (or renamed)"
check type-changed "BREAKING: ${V1} ResourceClaim spec.devices.requests[].exactly.count: type changed from integer to string"
check format-changed "BREAKING: ${V1} ResourceClaim spec.devices.requests[].exactly.count: format changed from \"int64\" to \"int32\""
check enum-value-removed "BREAKING: ${V1} ResourceClaim spec.devices.requests[].exactly.tolerations[].operator: enum value \"Equal\" removed"
check optional-made-required "BREAKING: ${V1} ResourceClaim spec.devices.requests[].exactly.count: optional field made required"
check list-type-changed "BREAKING: ${V1} ResourceClaim spec.devices.requests: list type (x-kubernetes-list-type) changed from \"atomic\" to \"set\""
check list-map-keys-changed "BREAKING: ${V1} ResourceClaim status.reservedFor: list map keys (x-kubernetes-list-map-keys) changed from [\"uid\"] to [\"uid\" \"name\"]"
check default-changed "BREAKING: ${V1} ResourceClaim spec.devices.requests[].exactly.deviceClassName: default changed from \"\" to \"gpu\""
check maxItems-lowered "BREAKING: ${V1} ResourceClaim spec.devices.requests: maxItems lowered from 32 to 16: validation tightened"
check maxLength-lowered "BREAKING: ${V1} ResourceClaim spec.devices.requests[].exactly.deviceClassName: maxLength lowered from 253 to 63: validation tightened"
check maximum-lowered "BREAKING: ${V1} ResourceClaim spec.devices.requests[].exactly.count: maximum lowered from 128 to 64: validation tightened"
check minimum-raised "BREAKING: ${V1} ResourceClaim spec.devices.requests[].exactly.count: minimum raised from 0 to 1: validation tightened"
check pattern-added "BREAKING: ${V1} ResourceClaim spec.devices.requests[].exactly.deviceClassName: pattern added (\"^[a-z0-9.-]+\$\"): validation tightened"
check pattern-changed "BREAKING: ${V1} ResourceClaim spec.devices.requests[].exactly.deviceClassName: pattern changed from \"^[a-z0-9.-]+\$\" to \"^[a-z0-9-]+\$\": validation tightened"
check operation-removed "BREAKING: ${V1} DELETE /apis/resource.draplane.dev/v1/namespaces/{namespace}/resourceclaims/{name}: operation removed"
check kind-removed "BREAKING: ${V1} DeviceTaintRule: served kind removed (not deprecated)"
check version-removed "BREAKING: ${V1}: served version removed"
check deprecated-version-removed-early "BREAKING: resource.draplane.dev/v1beta1: served version removed (DeviceClass served it: deprecated in 0.1, to be served until 0.3)"
check upstream-field-removed "BREAKING: resource.k8s.io/v1 ResourceClaim spec.devices.requests[].exactly.adminAccess: field removed (or renamed)"
check upstream-kind-removed "BREAKING: resource.k8s.io/v1 DeviceTaintRule: served kind removed (not deprecated)"
check addition
check allowed-break

# Through the whole pipeline once: a JSON field renamed in the Go types,
# regenerated (hack/update-codegen.sh), served and written to HEAD's
# documents (make update-openapi-spec) is refused.
tree="${WORK}/tree"
mkdir -p "${tree}"
tar -C "${ROOT}" --exclude=.git --exclude=_output -cf - . | tar -C "${tree}" -xf -
python3 - "${tree}/apis/resource/v1/types.go" <<'PY'
import sys
path = sys.argv[1]
src = open(path).read()
old = 'AdminAccess *bool `json:"adminAccess,omitempty"'
assert old in src, "anchor not found in " + path
open(path, "w").write(src.replace(old, 'AdminAccess *bool `json:"adminAccessRequested,omitempty"', 1))
PY
expected="BREAKING: ${V1} ResourceClaim spec.devices.requests[].exactly.adminAccess: field removed (or renamed)"
status=0
(
  cd "${tree}"
  hack/update-codegen.sh >/dev/null 2>&1
  UPDATE_OPENAPI_SPEC=true go test -count=1 ./test/integration/openapispec/ -run '^TestOpenAPISpec$' >/dev/null 2>&1
  hack/verify-api-compat.sh
) >"${WORK}/tree.log" 2>&1 || status=$?
if [[ ${status} -eq 0 ]]; then
  echo "FAIL: types-field-renamed: the check passed" >&2
  failures=$((failures + 1))
elif ! grep -qF -- "${expected}" "${WORK}/tree.log"; then
  echo "FAIL: types-field-renamed: the check failed without reporting \"${expected}\":" >&2
  tail -20 "${WORK}/tree.log" >&2
  failures=$((failures + 1))
else
  echo "ok: types-field-renamed fails: $(grep -F -- "${expected}" "${WORK}/tree.log" | head -1)"
fi

if [[ ${failures} -ne 0 ]]; then
  echo "FAIL: ${failures} case(s) of the API compatibility self-test" >&2
  exit 1
fi
echo "ok: verify-api-compat.sh rejects every class of breaking change and accepts additions and allow-listed breaks"
