# draplane: `make help` lists the targets.
SHELL := /usr/bin/env bash
GO ?= go
BIN := _output/bin
PKG := github.com/draplane/draplane
VERSION ?= v0.1.0-dev
GIT_COMMIT := $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
BUILD_DATE := $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
# Major and minor come from VERSION: the API server compares them with the
# lifecycle of each served kind (deprecation warnings, removal).
VERSION_MAJOR = $(shell echo '$(VERSION)' | sed -E 's/^v([0-9]+)\.([0-9]+).*/\1/')
VERSION_MINOR = $(shell echo '$(VERSION)' | sed -E 's/^v([0-9]+)\.([0-9]+).*/\2/')
LDFLAGS = -X k8s.io/component-base/version.gitVersion=$(VERSION) \
	-X k8s.io/component-base/version.gitMajor=$(VERSION_MAJOR) \
	-X k8s.io/component-base/version.gitMinor=$(VERSION_MINOR) \
	-X k8s.io/component-base/version.gitCommit=$(GIT_COMMIT) \
	-X k8s.io/component-base/version.gitTreeState=clean \
	-X k8s.io/component-base/version.buildDate=$(BUILD_DATE)
# Build tags of every build, test and check (exported in GOFLAGS, so that
# go commands started by tests and tools get them too). fieldsv1string is
# k8s.io/apimachinery's: a managedFields field set is an interned string,
# so the watch caches keep one copy of equal ones (every pod of a template,
# each status a controller writes). test/launcher (BuildTags) and the
# Dockerfile build with the same tags.
BUILD_TAGS := fieldsv1string
export GOFLAGS := $(strip $(GOFLAGS) -tags=$(BUILD_TAGS))
TEST_TIMEOUT ?= 30m
# `make run` starts the quickstart's setup: four simulated nodes with eight
# GPUs each (test/e2e/quickstart_test.go reads this line). RUN_ARGS= runs
# without the simulator.
RUN_ARGS ?= --simulate-nodes=4

.PHONY: help
help: ## List the targets.
	@grep -E '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

.PHONY: build
build: ## Build the dra-apiserver binary into _output/bin.
	@mkdir -p $(BIN)
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/dra-apiserver ./cmd/dra-apiserver

.PHONY: run
run: build ## Start the standalone control plane with 4 simulated nodes (RUN_ARGS overrides the flags).
	$(BIN)/dra-apiserver $(RUN_ARGS)

# `make image` writes the container image here: an OCI image layout (oci/)
# and a docker-archive tarball. IMAGE is the reference recorded in both.
IMAGE ?= ghcr.io/draplane/dra-apiserver:$(VERSION)
IMAGE_OUT ?= _output/image

.PHONY: image
image: ## Container image without a Docker daemon: static binary, non-root, OCI layout + tarball in _output/image (IMAGE names it).
	@mkdir -p $(IMAGE_OUT)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w $(LDFLAGS)" -o $(IMAGE_OUT)/dra-apiserver ./cmd/dra-apiserver
	$(GO) run ./hack/tools/image -binary $(IMAGE_OUT)/dra-apiserver -ref $(IMAGE) -version $(VERSION) -revision $(GIT_COMMIT) -oci $(IMAGE_OUT)/oci -tarball $(IMAGE_OUT)/dra-apiserver.tar

.PHONY: test
test: ## go test ./...: unit, storage against embedded etcd, integration, e2e with kubectl (not reliability, aggregation, upstream diff; README).
	$(GO) test -timeout $(TEST_TIMEOUT) ./...

# The differential test against the upstream allocator lives in its own
# module (allocator/testdata/upstream) so that k8s.io/dynamic-resource-allocation
# stays out of go.mod; `go test ./...` does not enter it. The instances
# upstream cannot judge go to the brute force in ./allocator.
UPSTREAM_ORACLE_SEEDS := $(CURDIR)/_output/upstream-oracle-seeds.txt

.PHONY: test-upstream-diff
test-upstream-diff: ## Our allocator against upstream's on 30,000 random instances; those upstream errs on against the brute force.
	@mkdir -p _output
	cd allocator/testdata/upstream && $(GO) mod download && \
		DRAPLANE_UPSTREAM_ORACLE_SEEDS=$(UPSTREAM_ORACLE_SEEDS) $(GO) test -count=1 -run '^TestDifferential$$' -v .
	DRAPLANE_UPSTREAM_ORACLE_SEEDS=$(UPSTREAM_ORACLE_SEEDS) $(GO) test -count=1 -run '^TestUpstreamErrorsOracle$$' -v ./allocator/

.PHONY: generate
generate: ## Regenerate deepcopy, defaulters, conversion, OpenAPI, clientset, listers, informers, applyconfigurations.
	hack/update-codegen.sh

.PHONY: verify-codegen
verify-codegen: ## Fail if generated code is out of date.
	hack/verify-codegen.sh

.PHONY: verify-codegen-selftest
verify-codegen-selftest: ## Prove verify-codegen fails when a type changes without regenerating.
	hack/verify-codegen-selftest.sh

.PHONY: fmt
fmt: ## Check gofmt.
	@out="$$(gofmt -l $$(git ls-files '*.go'))"; if [[ -n "$$out" ]]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

.PHONY: vet
vet: ## go vet every package, and those of test/e2e/upstreamdriver (a module of its own).
	$(GO) vet ./...
	cd test/e2e/upstreamdriver && $(GO) vet ./...

# The packages that run goroutines of their own (controllers, the driver
# side, the allocator's parallel search, the simulator, the controller
# manager): `make test-race` runs their tests under the race detector.
RACE_PKGS := ./internal/controllers/... ./driver/... ./allocator/... ./internal/simulator/... ./internal/controllermanager/... ./internal/inprocess/... ./test/integration/directinformers/...
# Left out of the race run: the allocator's TestOracle and
# TestOracleSelectNode, one goroutine each sweeping 12,000 random instances
# (the allocator package took 353 s of a 981 s race run with them, most of
# it theirs; `make test` runs them). The allocator's use from several
# goroutines is TestConcurrentUse.
RACE_SKIP := ^TestOracle(SelectNode)?$$

.PHONY: test-race
test-race: ## go test -race over the packages with concurrency: controllers, driver, allocator, simulator, controllermanager, the shared informers.
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) -skip '$(RACE_SKIP)' $(RACE_PKGS)

.PHONY: lint
lint: ## staticcheck (pinned in go.mod; staticcheck.conf) over every package but the generator output under generated/.
	$(GO) tool staticcheck $$($(GO) list ./... | grep -v '^$(PKG)/generated/')

# The modules whose go.mod and go.sum `make verify-tidy` checks: the main one
# and two kept apart so that their dependencies stay out of go.mod. Not
# test/e2e/aggregation/tools: it only builds kube-apiserver and etcd for
# `make test-aggregated`, and its tidy check downloads their whole
# dependency graph (681 MB, 50 s from an empty module cache).
MODULES := . test/e2e/upstreamdriver allocator/testdata/upstream

.PHONY: verify-tidy
verify-tidy: ## Fail if go mod tidy would change go.mod or go.sum of the main module, test/e2e/upstreamdriver or allocator/testdata/upstream.
	@for m in $(MODULES); do echo "go mod tidy -diff ($$m)"; (cd $$m && $(GO) mod tidy -diff) || exit 1; done

.PHONY: verify-longfuncs
verify-longfuncs: ## Fail if a hand-written non-test function is longer than 100 lines and its doc comment gives no reason ("long because").
	$(GO) run ./hack/tools/longfuncs -max 100

.PHONY: verify-layout
verify-layout: ## Fail if a package imports one above it (cmd -> internal/server -> {internal/controllermanager, internal/registry} -> ... -> internal/controllers -> {allocator, driver} -> ... -> apis).
	$(GO) run ./hack/tools/verify-layout

.PHONY: verify
verify: fmt vet verify-tidy lint verify-longfuncs verify-codegen verify-layout verify-api-compat test ## gofmt, go vet, go mod tidy, staticcheck, the long-function check, verify-codegen, the layout check, verify-api-compat and the tests.

.PHONY: bench
bench: ## Allocator benchmarks (ns/op, B/op, allocs/op), one node check against upstream's allocator (upstream/ours ratio), and pods bound/s by the allocation controller on a real in-process server.
	$(GO) test -run '^$$' -bench . -benchmem ./allocator/
	cd allocator/testdata/upstream && $(GO) test -run '^$$' -bench BenchmarkPerCheck .
	$(GO) test -run '^$$' -bench BenchmarkPodsBoundPerSecond -benchtime=1x ./test/integration/allocation/

.PHONY: fuzz
fuzz: ## Run every fuzz target for FUZZTIME each (default 60s).
	FUZZTIME=$(or $(FUZZTIME),60s) hack/fuzz.sh

.PHONY: bench-e2e
bench-e2e: build ## End-to-end numbers of the real binary: startup, claims/s vs raw etcd puts, pods bound/s on 500 simulated nodes, RSS (~2 min).
	$(GO) run ./test/bench -binary $(BIN)/dra-apiserver $(BENCH_ARGS)

.PHONY: bench-e2e-5000
bench-e2e-5000: build ## bench-e2e at scale: 5,000 simulated nodes x 8 GPUs, 10,000 pods, 20,000 claims (~10 min, several GiB).
	$(GO) run ./test/bench -binary $(BIN)/dra-apiserver -nodes 5000 -pods 10000 -total-claims 20000 $(BENCH_ARGS)

.PHONY: update-fixtures
update-fixtures: ## Rewrite the HEAD wire fixtures from the current types.
	UPDATE_COMPATIBILITY_FIXTURE_DATA=true $(GO) test ./apis/resource/ -run TestCompatibility

.PHONY: update-upstream-fixtures
update-upstream-fixtures: ## Copy upstream's resource.k8s.io v1/v1beta1 JSON fixtures from k8s.io/api, renamed to our group, for TestUpstreamFixtures.
	hack/update-upstream-fixtures.sh

.PHONY: update-openapi-spec
update-openapi-spec: ## Rewrite api/openapi-spec/HEAD from what an in-process server serves.
	UPDATE_OPENAPI_SPEC=true $(GO) test -count=1 ./test/integration/openapispec/ -run TestOpenAPISpec

.PHONY: verify-api-compat
verify-api-compat: ## Fail on every change of api/openapi-spec/HEAD that breaks clients of the newest frozen release.
	hack/verify-api-compat.sh

.PHONY: verify-api-compat-selftest
verify-api-compat-selftest: ## Prove verify-api-compat fails on each class of breaking change and passes on an addition.
	hack/verify-api-compat-selftest.sh

.PHONY: freeze-release
freeze-release: ## Freeze the wire fixtures and OpenAPI documents of a release: make freeze-release VERSION=vX.Y.Z.
	hack/freeze-release.sh $(VERSION)

.PHONY: clean
clean: ## Remove build output.
	rm -rf _output

.PHONY: test-reliability
test-reliability: ## Crash safety (~11,800 creates, updates, status writes and deletes; 33 kill -9, fsync on), HA on a 3-member etcd cluster, churn with a double-allocation checker, chaos over gangs, preemption and node agents with a real kubelet plugin on three replicas, the controllers' leader killed too (~7 min; RELIABILITY_LONG=1: a six-minute chaos mix).
	DRAPLANE_RELIABILITY=1 $(if $(RELIABILITY_LONG),DRAPLANE_CHAOS_LONG=1) $(GO) test -timeout $(TEST_TIMEOUT) -count=1 -v ./test/reliability/ $(if $(RELIABILITY_RUN),-run '$(RELIABILITY_RUN)')

.PHONY: test-aggregated
test-aggregated: ## Aggregated mode under a real kube-apiserver 1.37 + etcd on loopback (first run builds them, ~15 min; cached in ~/.cache/draplane).
	DRAPLANE_AGGREGATION=1 $(GO) test -timeout $(TEST_TIMEOUT) -count=1 -v ./test/e2e/aggregation/

.PHONY: bench-cluster
bench-cluster: ## draplane against kube-scheduler on one real control plane (kube-apiserver, kube-controller-manager, kube-scheduler 1.37): 500 fake nodes x 8 devices, 2,500 pods each (BENCH_NODES, BENCH_PODS); pods/s and CPU per pod of each process.
	DRAPLANE_CLUSTER_BENCH=1 $(GO) test -timeout $(TEST_TIMEOUT) -count=1 -v -run TestClusterSchedulingBench ./test/e2e/aggregation/

.PHONY: test-devicemap
test-devicemap: ## The device map page in headless Chromium (installs Debian's chromium if missing); screenshot in _output/devicemap.
	DRAPLANE_DEVICEMAP=1 $(GO) test -timeout $(TEST_TIMEOUT) -count=1 -v ./test/e2e/devicemap/
