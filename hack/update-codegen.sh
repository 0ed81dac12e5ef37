#!/usr/bin/env bash
# Regenerates every generated file: deepcopy, defaulters, conversion,
# protobuf (apis/), OpenAPI definitions, clientset, listers, informers and
# apply configurations (generated/). Downloads the modules it needs; works
# offline once the module cache is warm.
set -o errexit -o nounset -o pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MODULE=github.com/draplane/draplane
cd "${ROOT}"

# Fetch every module the generators and the packages they read need: on a
# fresh machine `go list -m` prints nothing for a module not yet in the
# module cache.
go mod download
CODEGEN_PKG="$(go list -m -f '{{.Dir}}' k8s.io/code-generator)"
if [[ -z "${CODEGEN_PKG}" || ! -f "${CODEGEN_PKG}/kube_codegen.sh" ]]; then
  echo "k8s.io/code-generator is not in the module cache (go mod download failed?)" >&2
  exit 1
fi
# shellcheck source=/dev/null
source "${CODEGEN_PKG}/kube_codegen.sh"
BOILERPLATE="${ROOT}/hack/boilerplate.go.txt"

kube::codegen::gen_helpers --boilerplate "${BOILERPLATE}" "${ROOT}/apis"

# The packages that serve another project's types over ours (tagged
# +k8s:conversion-gen-external-types, like apis/resource/upstreamv1 for
# k8s.io/api's resource.k8s.io/v1) must convert every field both ways: a
# field conversion-gen finds no peer for would be dropped silently on the
# wire. conversion-gen only leaves a WARNING comment in the generated
# file; fail here, naming the type and the field.
missing=0
while IFS= read -r doc; do
  dir="$(dirname "${doc}")"
  external="$(sed -n 's|^// +k8s:conversion-gen-external-types=||p' "${doc}")"
  if ! awk -v external="${external}" -v pkg="${dir#"${ROOT}/"}" '
      /^func autoConvert_/ { fn = $2; sub(/\(.*/, "", fn) }
      /WARNING: in\.[A-Za-z0-9_]+ requires manual conversion/ {
        field = $0; sub(/.*WARNING: in\./, "", field); sub(/ requires.*/, "", field)
        why = $0; sub(/.*requires manual conversion: /, "", why)
        n = split(fn, parts, "_")
        if (parts[2] == "resource") {
          from = "github.com/draplane/draplane/apis/resource"; to = external
        } else {
          from = external; to = "github.com/draplane/draplane/apis/resource"
        }
        printf "%s: field %s of %s.%s has no counterpart in %s (conversion-gen: %s, in %s)\n", pkg, field, from, parts[3], to, why, fn > "/dev/stderr"
        bad = 1
      }
      END { exit bad }' "${dir}/zz_generated.conversion.go"; then
    missing=1
  fi
done < <(grep -rl --include=doc.go '^// +k8s:conversion-gen-external-types=' "${ROOT}/apis")
if [[ ${missing} -ne 0 ]]; then
  echo "every field of the external types must convert to and from our internal types: add the field to apis/resource (and our versions), then run hack/update-codegen.sh" >&2
  exit 1
fi

# Protobuf encoding of the served versions (generated.proto and
# generated.pb.go; go-to-protobuf also writes the protobuf tags of the
# fields in types.go, keeping the numbers fields already have). It needs
# protoc, from Debian's protobuf-compiler when missing; protoc-gen-gogo and
# goimports are pinned as tools in go.mod. go-to-protobuf wants a
# GOPATH-like tree: the output dir holds this module under its import
# path, and the imported .proto files are found under theirs.
if ! command -v protoc >/dev/null; then
  if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
    apt-get install -y -qq protobuf-compiler >/dev/null || { apt-get update -qq && apt-get install -y -qq protobuf-compiler >/dev/null; }
  else
    echo "protoc is missing: install Debian's protobuf-compiler (or any protoc 3)" >&2
    exit 1
  fi
fi
protowork="$(mktemp -d)"
trap 'rm -rf "${protowork}"' EXIT
mkdir -p "${protowork}/bin" "${protowork}/src/${MODULE%/*}" "${protowork}/import/k8s.io" "${protowork}/import/github.com/gogo"
ln -s "${ROOT}" "${protowork}/src/${MODULE}"
ln -s "$(go list -m -f '{{.Dir}}' k8s.io/api)" "${protowork}/import/k8s.io/api"
ln -s "$(go list -m -f '{{.Dir}}' k8s.io/apimachinery)" "${protowork}/import/k8s.io/apimachinery"
gogo="$(go list -m -f '{{.Dir}}' github.com/gogo/protobuf)"
ln -s "${gogo}" "${protowork}/import/github.com/gogo/protobuf"
go build -o "${protowork}/bin/go-to-protobuf" k8s.io/code-generator/cmd/go-to-protobuf
go build -o "${protowork}/bin/protoc-gen-gogo" k8s.io/code-generator/cmd/go-to-protobuf/protoc-gen-gogo
go build -o "${protowork}/bin/goimports" golang.org/x/tools/cmd/goimports
proto_pkgs=()
while IFS= read -r dir; do
  proto_pkgs+=("${MODULE}/${dir#"${ROOT}/"}")
done < <(grep -rl --include=doc.go '^// +k8s:protobuf-gen=package' "${ROOT}/apis" | xargs -n1 dirname | sort)
(
  cd "${protowork}/src/${MODULE}"
  PATH="${protowork}/bin:${PATH}" go-to-protobuf \
    --output-dir "${protowork}/src" \
    --proto-import "${protowork}/import" \
    --proto-import "${gogo}/protobuf" \
    --go-header-file "${BOILERPLATE}" \
    --apimachinery-packages "-k8s.io/apimachinery/pkg/util/intstr,-k8s.io/apimachinery/pkg/api/resource,-k8s.io/apimachinery/pkg/runtime/schema,-k8s.io/apimachinery/pkg/runtime,-k8s.io/apimachinery/pkg/apis/meta/v1,-k8s.io/api/core/v1" \
    --packages "$(IFS=,; echo "${proto_pkgs[*]}")"
)
rm -rf "${protowork}"

# APILifecycle{Introduced,Deprecated,Removed,Replacement} methods of the
# packages tagged +k8s:prerelease-lifecycle-gen=true (v1beta1): the API
# server warns on every request to a deprecated version from them. The
# generator is pinned as a tool in go.mod, like the others.
find "${ROOT}/apis" -name zz_generated.prerelease-lifecycle.go -delete
lifecycle_pkgs=()
while IFS= read -r dir; do
  lifecycle_pkgs+=("./${dir#"${ROOT}/"}")
done < <(grep -rl --include=doc.go '^// +k8s:prerelease-lifecycle-gen=true' "${ROOT}/apis" | xargs -n1 dirname | sort)
if [[ ${#lifecycle_pkgs[@]} -gt 0 ]]; then
  go tool prerelease-lifecycle-gen \
    --output-file zz_generated.prerelease-lifecycle.go \
    --go-header-file "${BOILERPLATE}" \
    "${lifecycle_pkgs[@]}"
fi

# OpenAPI for our group plus every foreign type the server publishes
# (core-lite serves pods, nodes, namespaces, events, leases, PriorityClasses,
# PodGroups, RBAC and the self reviews). The
# violations list holds apimachinery's own rule violations we accept.
report_args=(--report-filename "${ROOT}/hack/api-rule-violations.list")
if [[ "${UPDATE_API_KNOWN_VIOLATIONS:-}" == "true" ]]; then
  report_args+=(--update-report)
fi
# openapi-gen does not remove model-name files of packages that dropped
# their model-package tag; start clean so stale ones can't survive.
find "${ROOT}/apis" -name zz_generated.model_name.go -delete
kube::codegen::gen_openapi \
  --output-dir "${ROOT}/generated/openapi" \
  --output-pkg "${MODULE}/generated/openapi" \
  --output-model-name-file zz_generated.model_name.go \
  --extra-pkgs k8s.io/api/core/v1 \
  --extra-pkgs k8s.io/api/coordination/v1 \
  --extra-pkgs k8s.io/api/policy/v1 \
  --extra-pkgs k8s.io/api/rbac/v1 \
  --extra-pkgs k8s.io/api/authorization/v1 \
  --extra-pkgs k8s.io/api/authentication/v1 \
  --extra-pkgs k8s.io/api/resource/v1 \
  --extra-pkgs k8s.io/api/scheduling/v1 \
  --extra-pkgs k8s.io/api/scheduling/v1beta1 \
  --extra-pkgs k8s.io/apimachinery/pkg/apis/meta/v1 \
  --extra-pkgs k8s.io/apimachinery/pkg/runtime \
  --extra-pkgs k8s.io/apimachinery/pkg/version \
  --extra-pkgs k8s.io/apimachinery/pkg/api/resource \
  --extra-pkgs k8s.io/apimachinery/pkg/util/intstr \
  "${report_args[@]}" \
  --boilerplate "${BOILERPLATE}" \
  "${ROOT}/apis"

# Apply configurations need the schema of our types to extract managed
# fields; render it from the definitions generated above.
schema="$(mktemp)"
trap 'rm -f "${schema}"' EXIT
go run ./hack/tools/models-schema > "${schema}"

kube::codegen::gen_client \
  --with-watch \
  --with-applyconfig \
  --applyconfig-openapi-schema "${schema}" \
  --output-dir "${ROOT}/generated" \
  --output-pkg "${MODULE}/generated" \
  --boilerplate "${BOILERPLATE}" \
  "${ROOT}/apis"
