#!/usr/bin/env bash
# Runs every fuzz target for FUZZTIME (default 60s) one after the other
# (go test -fuzz takes one target at a time) and prints executions per
# target. Seeds: the frozen fixtures and the corpora under testdata/fuzz.
set -o errexit -o nounset -o pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
FUZZTIME="${FUZZTIME:-60s}"

targets=(
  "./apis/resource FuzzDecode"
  "./apis/resource FuzzValidate"
  "./apis/resource FuzzV1beta1Conversion"
  "./internal/cel FuzzCompile"
)
# -fuzzminimizetime: the engine minimizes every new interesting input, by
# default for up to 60 s, and counts no executions meanwhile; a short run
# that ends while a worker minimizes fails with "context deadline exceeded".
# The bound makes that rare, not impossible (a run whose cached corpus takes
# most of FUZZTIME to replay can still end in a minimization). Such a run
# found no failing input: the engine writes a crasher to testdata/fuzz, and
# says so, even when the deadline ends its minimization. So that one
# failure, with no crasher written, counts as a run that ended early.
for entry in "${targets[@]}"; do
  read -r pkg target <<<"${entry}"
  log="$(mktemp)"
  if ! go test -run '^$' -fuzz "^${target}\$" -fuzztime "${FUZZTIME}" -fuzzminimizetime 100x "${pkg}" >"${log}" 2>&1; then
    if grep -q 'context deadline exceeded' "${log}" && ! grep -q 'Failing input written' "${log}" &&
      [ -z "$(git status --porcelain -- "${pkg}/testdata/fuzz/${target}")" ]; then
      execs="$(grep -o 'execs: [0-9]*' "${log}" | tail -1 || true)"
      echo "ok ${pkg} ${target} (${FUZZTIME}, ${execs:-the baseline only}; ended while minimizing a new input, no failing input)"
      rm -f "${log}"
      continue
    fi
    cat "${log}"
    echo "FAIL: ${target} in ${pkg}" >&2
    exit 1
  fi
  # A run spent on the cached corpus (the baseline) prints no count.
  execs="$(grep -o 'execs: [0-9]*' "${log}" | tail -1 || true)"
  echo "ok ${pkg} ${target} (${FUZZTIME}, ${execs:-the baseline only})"
  rm -f "${log}"
done
