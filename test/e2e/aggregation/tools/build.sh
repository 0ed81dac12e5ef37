#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager, kube-scheduler and etcd
# for the aggregation e2e tests into a cache keyed by version, and prints
# the directory holding the binaries. A second
# run with the same versions is a no-op; the Go build cache keeps even a
# rebuild with other flags short.
#   DRAPLANE_TOOLS_CACHE  cache root (default $HOME/.cache/draplane)
set -o errexit -o nounset -o pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

KUBE_VERSION=v1.37.1
ETCD_VERSION=v3.7.0
root="${DRAPLANE_TOOLS_CACHE:-${HOME}/.cache/draplane}"
out="${root}/aggregation-tools/kubernetes-${KUBE_VERSION}_etcd-${ETCD_VERSION}_$(go env GOOS)-$(go env GOARCH)"
mkdir -p "${out}"

# kubectl version must be able to parse the server version.
ldflags="-s -w \
 -X k8s.io/component-base/version.gitVersion=${KUBE_VERSION} \
 -X k8s.io/component-base/version.gitMajor=1 \
 -X k8s.io/component-base/version.gitMinor=37 \
 -X k8s.io/component-base/version.gitTreeState=clean \
 -X k8s.io/component-base/version.buildDate=1970-01-01T00:00:00Z"

# Fetch the modules first: on an empty module cache this is the slow step,
# and a network failure shows here rather than in the middle of the build.
components=(kube-apiserver kube-controller-manager kube-scheduler)
missing=()
for c in "${components[@]}"; do
  [[ -x "${out}/${c}" ]] || missing+=("${c}")
done
if [[ ${#missing[@]} -gt 0 || ! -x "${out}/etcd" ]]; then
  go mod download
fi

# One go build for the three control-plane components, so that the
# packages they share are compiled once.
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "building ${missing[*]} ${KUBE_VERSION} (about 20 min cold on 2 cores)..." >&2
  tmp="${out}/build.tmp"
  rm -rf "${tmp}" && mkdir -p "${tmp}"
  pkgs=()
  for c in "${missing[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/${c}"); done
  go build -trimpath -ldflags "${ldflags}" -o "${tmp}/" "${pkgs[@]}"
  for c in "${missing[@]}"; do mv "${tmp}/${c}" "${out}/${c}"; done
  rm -rf "${tmp}"
fi
if [[ ! -x "${out}/etcd" ]]; then
  echo "building etcd ${ETCD_VERSION}..." >&2
  go build -trimpath -ldflags "-s -w" -o "${out}/etcd.tmp" go.etcd.io/etcd/server/v3
  mv "${out}/etcd.tmp" "${out}/etcd"
fi
echo "${out}"
