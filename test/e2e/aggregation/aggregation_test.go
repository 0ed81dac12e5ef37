// Package aggregation runs dra-apiserver in aggregated mode under a real
// kube-apiserver 1.37 and a real etcd, all on loopback, and drives it with
// kubectl against the kube-apiserver only.
//
// It is slow the first time (kube-apiserver is built from the
// k8s.io/kubernetes module by tools/build.sh, ~15 min on 2 cores, then
// cached by version under $HOME/.cache/draplane) and needs kubectl, so it
// runs only with DRAPLANE_AGGREGATION=1 (`make test-aggregated`).
package aggregation

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/draplane/draplane/internal/controllers/podmode"
	"github.com/draplane/draplane/internal/podclaims"
	"github.com/draplane/draplane/internal/testing/skipnote"
	"github.com/draplane/draplane/internal/testing/testenv"
	"github.com/draplane/draplane/test/launcher"
)

const (
	// serverUser is the ServiceAccount of deploy/ the server runs as.
	serverUser = "system:serviceaccount:draplane-system:draplane"
	// e2eFieldManager applies deploy/ and the RBAC changes of testRBAC.
	e2eFieldManager = "draplane-e2e"
	// pollTimeout bounds every "wait until": the machine is shared.
	pollTimeout = 2 * time.Minute
	group       = "resource.draplane.dev"
)

// env is the running setup.
type env struct {
	dir            string
	hostKubeconfig string
	draDataDir     string
	draPort        int
	// The second replica (ha_test.go) and the flags both run with.
	draDataDir2     string
	draPort2        int
	replica2Exited  <-chan struct{}
	replicaArgs     []string
	frontProxyCert  tls.Certificate
	draCA           *x509.CertPool
	availableAfter  time.Duration
	kubectlPath     string
	apiserverReady  time.Duration
	draServerReady  time.Duration
	buildToolsTaken time.Duration
	// clusterCAFile and apiPort reach the kube-apiserver.
	clusterCAFile string
	apiPort       int
	// auditLog records the requests of the server's ServiceAccount.
	auditLog string
	// serverToken is the ServiceAccount token the server runs with.
	serverToken string
	// apiserver is the host's kube-apiserver.
	apiserver *launcher.Process
}

func TestMain(m *testing.M) {
	if os.Getenv("DRAPLANE_AGGREGATION") != "1" && os.Getenv("DRAPLANE_CLUSTER_BENCH") != "1" {
		skipnote.Print("test/e2e/aggregation", "aggregated mode under a real kube-apiserver takes minutes; run it with DRAPLANE_AGGREGATION=1 (make test-aggregated)")
	}
	os.Exit(m.Run())
}

func TestAggregation(t *testing.T) {
	if os.Getenv("DRAPLANE_AGGREGATION") != "1" {
		t.Skip("set DRAPLANE_AGGREGATION=1 (make test-aggregated): builds and runs a real kube-apiserver and etcd")
	}
	e := setUp(t)
	t.Logf("tools ready in %v, kube-apiserver ready in %v, dra-apiserver ready in %v, APIService Available %v after apply",
		e.buildToolsTaken.Round(time.Millisecond), e.apiserverReady.Round(time.Millisecond), e.draServerReady.Round(time.Millisecond), e.availableAfter.Round(time.Millisecond))

	t.Run("discovery", e.testDiscovery)
	t.Run("crud", e.testCRUD)
	t.Run("authorization", e.testAuthorization)
	t.Run("admin access follows the host namespace label", e.testAdminAccess)
	t.Run("host pod", e.testHostPod)
	t.Run("two replicas", e.testReplicas)
	t.Run("driver service account held to its node", e.testDriverServiceAccount)
	// Last: it reads what the server did in all of the above, and takes
	// permissions away one at a time.
	t.Run("rbac", e.testRBAC)
}

func setUp(t *testing.T) *env {
	e := &env{dir: t.TempDir()}
	var err error
	if e.kubectlPath, err = exec.LookPath("kubectl"); err != nil {
		t.Fatalf("kubectl: %v", err)
	}

	toolsDir := buildTools(t, e)
	draBinary := buildServer(t, e)

	// The audit log records every request of the server's ServiceAccount
	// (testRBAC reads it).
	etcdURL := e.startHost(t, toolsDir, append(e.auditArgs(t),
		// No controller manager creates the default service accounts.
		"--disable-admission-plugins=ServiceAccount")...)

	// deploy/external-etcd (two replicas on an etcd cluster) as an
	// operator applies it; the server runs as its ServiceAccount.
	serverKubeconfig := e.applyDeploy(t, "external-etcd")

	// Two replicas on one etcd, as deploy/external-etcd runs them, each
	// with a data dir of its own; the second starts once the first is
	// ready, so the first stores the shared CA.
	start := time.Now()
	e.replicaArgs = []string{
		"--mode=aggregated", "--kubeconfig=" + serverKubeconfig,
		"--bind-address=127.0.0.1",
		"--etcd-servers=" + etcdURL, "--etcd-prefix=/draplane",
		"--service-name=draplane", "--service-namespace=draplane-system",
		"--leader-elect-resource-namespace=draplane-system",
		"--leader-elect-retry-period=500ms",
		"--shared-ca-secret=draplane-ca",
		"--driver-service-account=" + driverServiceAccount + "=gpu.example.com",
		"--v=2",
	}
	e.draDataDir = filepath.Join(e.dir, "draplane-0")
	draExited := e.startReplica(t, "dra-apiserver-0", draBinary, e.draDataDir, e.draPort)
	caPEM := waitForFile(t, filepath.Join(e.draDataDir, "pki", "ca.crt"), draExited)
	e.draCA = x509.NewCertPool()
	e.draCA.AppendCertsFromPEM(caPEM)
	e.waitReady(t, "dra-apiserver-0", e.draPort, draExited)
	e.draServerReady = time.Since(start)
	e.draDataDir2 = filepath.Join(e.dir, "draplane-1")
	e.replica2Exited = e.startReplica(t, "dra-apiserver-1", draBinary, e.draDataDir2, e.draPort2)

	// The replicas write the shared CA into both APIServices; nobody else
	// does. Replicas with CAs of their own would overwrite each other's
	// bundle, and the APIServices would not become Available.
	start = time.Now()
	for _, version := range []string{"v1", "v1beta1"} {
		name := version + "." + group
		poll(t, "APIService "+name+" Available", func() (bool, error) {
			if err := exitedErr(draExited); err != nil {
				return false, err
			}
			out, err := e.kubectl("get", "apiservice", name, "-o", `jsonpath={.status.conditions[?(@.type=="Available")].status}`)
			return err == nil && out == "True", nil
		})
		out, err := e.kubectl("get", "apiservice", name, "-o", "jsonpath={.spec.caBundle}")
		if err != nil {
			t.Fatal(err)
		}
		if bundle, err := base64.StdEncoding.DecodeString(out); err != nil || !bytes.Equal(bundle, caPEM) {
			t.Errorf("APIService %s: spec.caBundle is not the server's CA (%v): %q", name, err, out)
		}
		out, err = e.kubectl("get", "apiservice", name, "-o", `jsonpath={.metadata.managedFields[?(@.manager=="dra-apiserver")].operation}`)
		if err != nil || out != "Update" {
			t.Errorf("APIService %s: no field manager dra-apiserver (the server's patch): %v %q", name, err, out)
		}
	}
	e.availableAfter = time.Since(start)
	return e
}

func (e *env) testDiscovery(t *testing.T) {
	versions, err := e.kubectl("api-versions")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{group + "/v1", group + "/v1beta1"} {
		if !strings.Contains(versions, want+"\n") && !strings.HasSuffix(versions, want) {
			t.Errorf("api-versions lacks %s:\n%s", want, versions)
		}
	}
	resources, err := e.kubectl("api-resources", "--api-group="+group, "-o", "name")
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"deviceclasses", "resourceclaims", "resourceclaimtemplates", "resourceslices", "devicetaintrules"} {
		if !strings.Contains(resources, kind+"."+group) {
			t.Errorf("api-resources lacks %s:\n%s", kind, resources)
		}
	}
	// Core kinds are the host's, not ours (core-lite is off).
	if out, err := e.kubectl("get", "--raw=/apis/"+group+"/v1"); err != nil || strings.Contains(out, `"pods"`) {
		t.Errorf("our group's discovery: %v\n%s", err, out)
	}
}

// kinds are one object of each kind as a user writes it.
var kinds = []struct {
	resource, namespace, name, manifest string
	// notInV1beta1: v1beta1 (as upstream's) has no such kind.
	notInV1beta1 bool
}{
	{"deviceclasses", "", "agg-class", `apiVersion: resource.draplane.dev/v1
kind: DeviceClass
metadata:
  name: agg-class
spec:
  selectors:
  - cel:
      expression: device.driver == "agg.example.com"
`, false},
	{"resourceslices", "", "agg-slice", `apiVersion: resource.draplane.dev/v1
kind: ResourceSlice
metadata:
  name: agg-slice
spec:
  driver: agg.example.com
  nodeName: agg-node
  pool: {name: agg-pool, generation: 1, resourceSliceCount: 1}
  devices:
  - name: dev-0
`, false},
	{"resourceclaimtemplates", "default", "agg-template", `apiVersion: resource.draplane.dev/v1
kind: ResourceClaimTemplate
metadata:
  name: agg-template
  namespace: default
spec:
  spec:
    devices:
      requests:
      - name: req
        exactly: {deviceClassName: agg-class, allocationMode: ExactCount, count: 1}
`, false},
	{"resourceclaims", "default", "agg-claim", `apiVersion: resource.draplane.dev/v1
kind: ResourceClaim
metadata:
  name: agg-claim
  namespace: default
spec:
  devices:
    requests:
    - name: req
      exactly: {deviceClassName: agg-class, allocationMode: ExactCount, count: 1}
`, false},
	{"devicetaintrules", "", "agg-rule", `apiVersion: resource.draplane.dev/v1
kind: DeviceTaintRule
metadata:
  name: agg-rule
spec:
  deviceSelector: {driver: agg.example.com, pool: agg-pool}
  taint: {key: example.com/maintenance, value: planned, effect: NoSchedule}
`, true},
}

func (e *env) testCRUD(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.resource, func(t *testing.T) {
			ns := []string{}
			if k.namespace != "" {
				ns = []string{"-n", k.namespace}
			}
			if out, err := e.kubectlStdin(k.manifest, "create", "-f", "-"); err != nil {
				t.Fatalf("create: %v\n%s", err, out)
			}
			full := k.resource + "." + group
			out, err := e.kubectl(append([]string{"get", full, k.name, "-o", "jsonpath={.metadata.uid}"}, ns...)...)
			if err != nil || out == "" {
				t.Fatalf("get: %v %q", err, out)
			}
			// The same object through the other served version.
			if !k.notInV1beta1 {
				// v1beta1 is deprecated: the warning must come through the
				// aggregator too, on stderr, apart from the output.
				out, warnings, err := e.kubectlSplit(append([]string{"get", k.resource + ".v1beta1." + group, k.name, "-o", "jsonpath={.apiVersion}"}, ns...)...)
				if err != nil || out != group+"/v1beta1" {
					t.Errorf("get as v1beta1: %v %q", err, out)
				}
				if !strings.Contains(warnings, "is deprecated") {
					t.Errorf("get as v1beta1 printed no deprecation warning: %q", warnings)
				}
			}
			if out, err := e.kubectl(append([]string{"label", full, k.name, "e2e=aggregated"}, ns...)...); err != nil {
				t.Fatalf("label (update): %v\n%s", err, out)
			}
			if out, err := e.kubectl(append([]string{"get", full, "-l", "e2e=aggregated", "-o", "name"}, ns...)...); err != nil || !strings.Contains(out, k.name) {
				t.Errorf("list by label: %v %q", err, out)
			}
			if out, err := e.kubectl(append([]string{"patch", full, k.name, "--type=merge", "-p", `{"metadata":{"annotations":{"e2e":"patched"}}}`}, ns...)...); err != nil {
				t.Fatalf("patch: %v\n%s", err, out)
			}
			if out, err := e.kubectl(append([]string{"delete", full, k.name, "--wait=true"}, ns...)...); err != nil {
				t.Fatalf("delete: %v\n%s", err, out)
			}
			if out, err := e.kubectl(append([]string{"get", full, k.name, "--ignore-not-found", "-o", "name"}, ns...)...); err != nil || out != "" {
				t.Errorf("still there after delete: %v %q", err, out)
			}
		})
	}
}

// testAuthorization: the host's RBAC decides, through SubjectAccessReview
// from our server. A user without a role is refused by the kube-apiserver
// before the request is proxied, so the check that our server itself
// refuses is made directly against it, authenticated as the aggregator
// (front-proxy client certificate with X-Remote-User).
// driverServiceAccount is a DRA driver's ServiceAccount, node-bound by
// --driver-service-account.
const driverServiceAccount = "dra-driver/gpu-driver"

// testDriverServiceAccount: a driver's service account, bound to deploy/'s
// ClusterRole draplane:driver in the host, may publish slices only of the
// node its token names (the extra authentication.kubernetes.io/node-name,
// which the aggregator passes on as X-Remote-Extra-) and of its driver;
// the host's RBAC alone would allow any. Requests go to our server as the
// aggregator sends them (kubectl 1.32 cannot impersonate an extra).
func (e *env) testDriverServiceAccount(t *testing.T) {
	binding := `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: gpu-driver}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "draplane:driver"}
subjects:
- {kind: ServiceAccount, name: gpu-driver, namespace: dra-driver}
`
	if out, err := e.kubectlStdin(binding, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply binding: %v\n%s", err, out)
	}
	slice := func(name, node, driver string) string {
		return fmt.Sprintf(`{"apiVersion":"resource.draplane.dev/v1","kind":"ResourceSlice","metadata":{"name":%q},`+
			`"spec":{"driver":%q,"nodeName":%q,"pool":{"name":%q,"generation":1,"resourceSliceCount":1}}}`, name, driver, node, node)
	}
	const slices = "/apis/resource.draplane.dev/v1/resourceslices"
	const label = `{"metadata":{"labels":{"changed-by":"gpu-driver"}}}`
	for _, tc := range []struct {
		name, method, path, contentType, body, nodeName string
		wantStatus                                      int
		wantMessage                                     string
	}{
		{"its node", "POST", slices, "application/json", slice("sa-node-a", "node-a", "gpu.example.com"), "node-a", http.StatusCreated, ""},
		{"another node", "POST", slices, "application/json", slice("sa-node-b", "node-b", "gpu.example.com"), "node-a", http.StatusForbidden, `may only write ResourceSlices with spec.nodeName node-a; slice sa-node-b has \"node-b\"`},
		{"another driver", "POST", slices, "application/json", slice("sa-node-a-nic", "node-a", "nic.example.com"), "node-a", http.StatusForbidden, "not listed for the service account"},
		{"token without a node", "POST", slices, "application/json", slice("sa-no-node", "node-a", "gpu.example.com"), "", http.StatusForbidden, "names no node"},
		// Updates are checked by the store, not the admission chain.
		{"patch of its node's slice", "PATCH", slices + "/sa-node-a", "application/merge-patch+json", label, "node-a", http.StatusOK, ""},
		{"patch of another node's slice", "PATCH", slices + "/sa-node-a", "application/merge-patch+json", label, "node-b", http.StatusForbidden,
			`resourceslices.resource.draplane.dev \"sa-node-a\" is forbidden: node restriction: system:serviceaccount:dra-driver:gpu-driver may only write ResourceSlices with spec.nodeName node-b; slice sa-node-a has \"node-a\"`},
		{"dry-run patch of another node's slice", "PATCH", slices + "/sa-node-a?dryRun=All", "application/merge-patch+json", label, "node-b", http.StatusForbidden, `slice sa-node-a has \"node-a\"`},
		{"patch with a token without a node", "PATCH", slices + "/sa-node-a", "application/merge-patch+json", label, "", http.StatusForbidden, "names no node"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := e.driverRequest(t, tc.method, tc.path, tc.contentType, tc.body, tc.nodeName)
			if code != tc.wantStatus || !strings.Contains(body, tc.wantMessage) {
				t.Errorf("status %d, want %d naming %q: %s", code, tc.wantStatus, tc.wantMessage, body)
			}
		})
	}
	t.Run("claim status", e.testDriverServiceAccountClaimStatus)
}

// testDriverServiceAccountClaimStatus: the driver's service account may
// change status.devices of a claim and nothing else of its status (the
// status store's check of updates).
func (e *env) testDriverServiceAccountClaimStatus(t *testing.T) {
	claim := `{"apiVersion":"resource.draplane.dev/v1","kind":"ResourceClaim","metadata":{"name":"sa-claim","namespace":"default"},` +
		`"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpu.example.com"}}]}}}`
	if out, err := e.kubectlStdin(claim, "apply", "-f", "-"); err != nil {
		t.Fatalf("create claim: %v\n%s", err, out)
	}
	defer func() {
		_, _ = e.kubectl("delete", "resourceclaims.resource.draplane.dev", "sa-claim", "-n", "default", "--ignore-not-found")
	}()
	allocation := `{"status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":"gpu.example.com","pool":"node-a","device":"d0"}]},` +
		`"nodeSelector":{"nodeSelectorTerms":[{"matchFields":[{"key":"metadata.name","operator":"In","values":["node-a"]}]}]}}}}`
	if out, err := e.kubectl("patch", "resourceclaims.resource.draplane.dev", "sa-claim", "-n", "default", "--subresource=status", "--type=merge", "-p", allocation); err != nil {
		t.Fatalf("allocate claim: %v\n%s", err, out)
	}
	const status = "/apis/resource.draplane.dev/v1/namespaces/default/resourceclaims/sa-claim/status"
	code, body := e.driverRequest(t, "PATCH", status, "application/merge-patch+json", `{"status":{"devices":[{"driver":"gpu.example.com","pool":"node-a","device":"d0"}]}}`, "node-a")
	if code != http.StatusOK {
		t.Errorf("writing status.devices: status %d: %s", code, body)
	}
	const refused = `resourceclaims.resource.draplane.dev \"sa-claim\" is forbidden: node restriction: system:serviceaccount:dra-driver:gpu-driver may only change status.devices of claim default/sa-claim`
	for _, query := range []string{"", "?dryRun=All"} {
		code, body = e.driverRequest(t, "PATCH", status+query, "application/merge-patch+json", `{"status":{"reservedFor":[{"resource":"pods","name":"p","uid":"u"}]}}`, "node-a")
		if code != http.StatusForbidden || !strings.Contains(body, refused) {
			t.Errorf("writing status.reservedFor%s: status %d, want 403 naming %q: %s", query, code, refused, body)
		}
	}
}

// driverRequest sends a request to our server as the aggregator sends
// the driver's service account's, with nodeName ("": none) as the node
// its token names.
func (e *env) driverRequest(t *testing.T, method, path, contentType, body, nodeName string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, e.draURL(path), strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	namespace, name, _ := strings.Cut(driverServiceAccount, "/")
	req.Header.Set("X-Remote-User", "system:serviceaccount:"+namespace+":"+name)
	req.Header.Add("X-Remote-Group", "system:serviceaccounts")
	req.Header.Add("X-Remote-Group", "system:authenticated")
	if nodeName != "" {
		req.Header.Set("X-Remote-Extra-Authentication.kubernetes.io%2fnode-name", nodeName)
	}
	resp, err := e.draClient(&e.frontProxyCert).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(answer)
}

func (e *env) testAuthorization(t *testing.T) {
	role := `apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: claim-reader, namespace: default}
rules:
- apiGroups: [resource.draplane.dev]
  resources: [resourceclaims]
  verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: reader-can-read-claims, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: claim-reader}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: reader}
`
	if out, err := e.kubectlStdin(role, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply RBAC: %v\n%s", err, out)
	}
	tests := map[string]struct {
		user, path string
		wantStatus int
	}{
		"denied user":                    {user: "denied", path: "/apis/resource.draplane.dev/v1/namespaces/default/resourceclaims", wantStatus: http.StatusForbidden},
		"reader lists claims":            {user: "reader", path: "/apis/resource.draplane.dev/v1/namespaces/default/resourceclaims", wantStatus: http.StatusOK},
		"reader, other namespace":        {user: "reader", path: "/apis/resource.draplane.dev/v1/namespaces/kube-system/resourceclaims", wantStatus: http.StatusForbidden},
		"reader, other resource":         {user: "reader", path: "/apis/resource.draplane.dev/v1/deviceclasses", wantStatus: http.StatusForbidden},
		"denied user, health is allowed": {user: "denied", path: "/readyz", wantStatus: http.StatusOK},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			// Through the kube-apiserver (kubectl impersonating the user).
			if !strings.HasPrefix(tc.path, "/readyz") {
				out, err := e.kubectl("--as="+tc.user, "get", "--raw="+tc.path)
				if tc.wantStatus == http.StatusOK && err != nil {
					t.Errorf("kubectl as %s: %v\n%s", tc.user, err, out)
				}
				if tc.wantStatus == http.StatusForbidden && (err == nil || !strings.Contains(out, "Forbidden") && !strings.Contains(out, "forbidden")) {
					t.Errorf("kubectl as %s: expected Forbidden, got %v\n%s", tc.user, err, out)
				}
			}
			// Our server itself, as the aggregator calls it.
			req, err := http.NewRequest(http.MethodGet, e.draURL(tc.path), nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Remote-User", tc.user)
			req.Header.Set("X-Remote-Group", "system:authenticated")
			resp, err := e.draClient(&e.frontProxyCert).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.wantStatus {
				t.Errorf("dra-apiserver as %s: status %d, want %d: %s", tc.user, resp.StatusCode, tc.wantStatus, body)
			}
			if tc.wantStatus == http.StatusForbidden && !bytes.Contains(body, []byte(`"reason":"Forbidden"`)) {
				t.Errorf("dra-apiserver as %s: not a Forbidden status: %s", tc.user, body)
			}
		})
	}
	// Without the front-proxy certificate the headers count for nothing.
	req, _ := http.NewRequest(http.MethodGet, e.draURL(tests["reader lists claims"].path), nil)
	req.Header.Set("X-Remote-User", "reader")
	resp, err := e.draClient(nil).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
		t.Errorf("anonymous request with X-Remote-User: status %d, want 401 or 403", resp.StatusCode)
	}
}

// testHostPod: a pod of the host cluster names a template in the
// annotation and carries the gate; the controllers generate its claim,
// allocate it on the only node with a device, pin the pod there by node
// affinity and remove the gate. No kube-scheduler or kubelet runs, so the
// pod stays Pending with the affinity.
// testAdminAccess: a claim asking for admin access is refused in a host
// namespace without the resource.kubernetes.io/admin-access=true label
// and accepted once the host's namespace has it: the label is read from
// the host cluster, where the namespaces are.
func (e *env) testAdminAccess(t *testing.T) {
	if out, err := e.kubectl("create", "namespace", "admin-access"); err != nil {
		t.Fatalf("create namespace: %v\n%s", err, out)
	}
	claim := `apiVersion: resource.draplane.dev/v1
kind: ResourceClaim
metadata: {name: admin, namespace: admin-access}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.example.com, adminAccess: true}
`
	out, err := e.kubectlStdin(claim, "create", "-f", "-")
	if err == nil || !strings.Contains(out, "adminAccess") || !strings.Contains(out, "resource.kubernetes.io/admin-access") {
		t.Fatalf("admin access in a host namespace without the label: err=%v, want a refusal naming the field and the label\n%s", err, out)
	}
	if out, err := e.kubectl("label", "namespace", "admin-access", "resource.kubernetes.io/admin-access=true"); err != nil {
		t.Fatalf("label namespace: %v\n%s", err, out)
	}
	if out, err := e.kubectlStdin(claim, "create", "-f", "-"); err != nil {
		t.Fatalf("admin access in a labelled host namespace refused: %v\n%s", err, out)
	}
}

func (e *env) testHostPod(t *testing.T) {
	objects := `apiVersion: v1
kind: Node
metadata:
  name: node-1
---
apiVersion: v1
kind: Node
metadata:
  name: node-2
---
apiVersion: resource.draplane.dev/v1
kind: DeviceClass
metadata: {name: gpu.example.com}
spec:
  selectors:
  - cel: {expression: device.driver == "gpu.example.com"}
---
apiVersion: resource.draplane.dev/v1
kind: ResourceSlice
metadata: {name: node-1-gpu}
spec:
  driver: gpu.example.com
  nodeName: node-1
  pool: {name: node-1, generation: 1, resourceSliceCount: 1}
  devices:
  - name: gpu-0
---
apiVersion: resource.draplane.dev/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.example.com, allocationMode: ExactCount, count: 1}
`
	if out, err := e.kubectlStdin(objects, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	// Simulated nodes: Ready, as a kubelet would report, and without the
	// not-ready taint that admission (TaintNodesByCondition) puts on new
	// nodes and the node lifecycle controller would remove.
	for _, node := range []string{"node-1", "node-2"} {
		if out, err := e.kubectl("taint", "node", node, "node.kubernetes.io/not-ready:NoSchedule-"); err != nil && !strings.Contains(out, "not found") {
			t.Fatalf("node %s untaint: %v\n%s", node, err, out)
		}
		status := fmt.Sprintf(`{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","lastHeartbeatTime":%q,"lastTransitionTime":%q}]}}`,
			time.Now().UTC().Format(time.RFC3339), time.Now().UTC().Format(time.RFC3339))
		if out, err := e.kubectl("patch", "node", node, "--subresource=status", "--type=merge", "-p", status); err != nil {
			t.Fatalf("node %s Ready: %v\n%s", node, err, out)
		}
	}
	pod := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: gpu-job
  namespace: default
  annotations:
    %s: '[{"name":"gpu","resourceClaimTemplateName":"one-gpu"}]'
spec:
  schedulingGates:
  - name: %s
  automountServiceAccountToken: false
  containers:
  - name: main
    image: registry.k8s.io/pause:3.10
`, podclaims.ClaimsAnnotation, podclaims.SchedulingGate)
	if out, err := e.kubectlStdin(pod, "create", "-f", "-"); err != nil {
		t.Fatalf("create pod: %v\n%s", err, out)
	}

	var got corev1.Pod
	poll(t, "pod ungated and pinned", func() (bool, error) {
		out, err := e.kubectl("get", "pod", "-n", "default", "gpu-job", "-o", "json")
		if err != nil {
			return false, nil
		}
		got = corev1.Pod{}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			return false, err
		}
		return len(got.Spec.SchedulingGates) == 0, nil
	}, e)
	want := got.DeepCopy()
	if podmode.RequireNode(want, "node-1") {
		t.Errorf("pod not pinned to node-1 by node affinity: %+v", got.Spec.Affinity)
	}
	statuses := podclaims.StatusOf(&got)
	claimName := statuses["gpu"]
	if claimName == nil {
		t.Fatalf("no generated claim in annotation %s: %v", podclaims.ClaimStatusesAnnotation, got.Annotations)
	}

	// The claim lives in our etcd and is listed through the host.
	out, err := e.kubectl("get", "resourceclaims."+group, "-A")
	if err != nil || !strings.Contains(out, *claimName) {
		t.Errorf("kubectl get resourceclaims.%s -A: %v\n%s", group, err, out)
	}
	t.Logf("kubectl --kubeconfig <host> get resourceclaims.%s -A:\n%s", group, out)
	out, err = e.kubectl("get", "resourceclaims."+group, "-n", "default", *claimName, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var claim struct {
		Metadata struct {
			OwnerReferences []struct{ Kind, Name, UID string } `json:"ownerReferences"`
		} `json:"metadata"`
		Status struct {
			Allocation *struct {
				Devices struct {
					Results []struct{ Pool, Device string } `json:"results"`
				} `json:"devices"`
			} `json:"allocation"`
			ReservedFor []struct{ Name, UID string } `json:"reservedFor"`
		} `json:"status"`
	}
	if err := json.Unmarshal([]byte(out), &claim); err != nil {
		t.Fatal(err)
	}
	if claim.Status.Allocation == nil || len(claim.Status.Allocation.Devices.Results) != 1 ||
		claim.Status.Allocation.Devices.Results[0].Pool != "node-1" || claim.Status.Allocation.Devices.Results[0].Device != "gpu-0" {
		t.Errorf("claim not allocated node-1/gpu-0: %s", out)
	}
	if len(claim.Status.ReservedFor) != 1 || claim.Status.ReservedFor[0].UID != string(got.UID) {
		t.Errorf("claim not reserved for the pod: %s", out)
	}
	if len(claim.Metadata.OwnerReferences) != 1 || claim.Metadata.OwnerReferences[0].UID != string(got.UID) {
		t.Errorf("claim not owned by the host pod: %s", out)
	}

	// A NoExecute taint on its device evicts the host pod; its generated
	// claim goes with it.
	rule := `apiVersion: resource.draplane.dev/v1
kind: DeviceTaintRule
metadata: {name: gpu-0-broken}
spec:
  deviceSelector: {driver: gpu.example.com, pool: node-1, device: gpu-0}
  taint: {key: example.com/broken, value: "true", effect: NoExecute}
`
	if out, err := e.kubectlStdin(rule, "create", "-f", "-"); err != nil {
		t.Fatalf("create DeviceTaintRule: %v\n%s", err, out)
	}
	poll(t, "host pod evicted", func() (bool, error) {
		out, err := e.kubectl("get", "pod", "-n", "default", "gpu-job", "--ignore-not-found", "-o", "name")
		return err == nil && out == "", nil
	}, e)
	poll(t, "generated claim deleted with its pod", func() (bool, error) {
		out, err := e.kubectl("get", "resourceclaims."+group, "-n", "default", *claimName, "--ignore-not-found", "-o", "name")
		return err == nil && out == "", nil
	}, e)
	if out, err := e.kubectl("get", "events", "-n", "default", "--field-selector=involvedObject.name=gpu-job", "-o", "custom-columns=REASON:.reason", "--no-headers"); err != nil || !strings.Contains(out, "DeviceTaintEviction") {
		t.Errorf("no DeviceTaintEviction event for the host pod: %v\n%s", err, out)
	}
}

// --- helpers ---------------------------------------------------------

func (e *env) kubectl(args ...string) (string, error) {
	return e.kubectlStdin("", args...)
}

func (e *env) kubectlStdin(stdin string, args ...string) (string, error) {
	stdout, stderr, err := e.runKubectl(stdin, args...)
	return strings.TrimSpace(stdout + stderr), err
}

// kubectlSplit runs kubectl and returns its standard output and its
// standard error (where warnings go) apart.
func (e *env) kubectlSplit(args ...string) (string, string, error) {
	stdout, stderr, err := e.runKubectl("", args...)
	return strings.TrimSpace(stdout), stderr, err
}

// runKubectl runs kubectl against the host cluster, for a minute at most.
func (e *env) runKubectl(stdin string, args ...string) (string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return testenv.Kubectl(ctx, e.kubectlPath, []string{"--kubeconfig=" + e.hostKubeconfig}, stdin, args...)
}

func (e *env) draURL(path string) string {
	return fmt.Sprintf("https://127.0.0.1:%d%s", e.draPort, path)
}

// draClient talks to our server directly, checking its certificate for
// the name the aggregator uses.
func (e *env) draClient(cert *tls.Certificate) *http.Client {
	config := &tls.Config{RootCAs: e.draCA, ServerName: "draplane.draplane-system.svc"}
	if cert != nil {
		config.Certificates = []tls.Certificate{*cert}
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: config}}
}

// poll waits for condition; on timeout it logs what the debug commands
// (kubectl arguments) show, then fails the test.
func poll(t *testing.T, what string, condition func() (bool, error), debug ...*env) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, pollTimeout, true, func(context.Context) (bool, error) {
		return condition()
	})
	if err != nil {
		for _, e := range debug {
			for _, args := range [][]string{
				{"get", "pods", "-A", "-o", "yaml"},
				{"get", "resourceclaims." + group, "-A", "-o", "yaml"},
				{"get", "nodes", "-o", "wide"},
				{"get", "events", "-A"},
			} {
				out, _ := e.kubectl(args...)
				t.Logf("kubectl %s:\n%s", strings.Join(args, " "), out)
			}
		}
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func waitForFile(t *testing.T, path string, exited <-chan struct{}) []byte {
	t.Helper()
	var data []byte
	poll(t, path, func() (bool, error) {
		if err := exitedErr(exited); err != nil {
			return false, err
		}
		var err error
		data, err = os.ReadFile(path)
		return err == nil && len(data) > 0, nil
	})
	return data
}

// exitedErr fails a wait for a process that is gone.
func exitedErr(exited <-chan struct{}) error {
	select {
	case <-exited:
		return fmt.Errorf("the process exited")
	default:
		return nil
	}
}

// startProcess runs a binary until the test ends (and no longer than the
// test process), keeping its output; the last lines are logged if the test
// fails. The channel is closed when the process exits.
func startProcess(t *testing.T, name, binary string, args ...string) <-chan struct{} {
	t.Helper()
	return startProcessP(t, name, binary, args...).Exited()
}

// startProcessP is startProcess returning the process.
func startProcessP(t *testing.T, name, binary string, args ...string) *launcher.Process {
	t.Helper()
	p := &launcher.Process{Name: name, Binary: binary, Args: args,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}}
	if err := p.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() || os.Getenv("DRAPLANE_AGGREGATION_LOGS") != "" {
			t.Logf("last lines of %s:\n%s", name, launcher.Tail(p.Output(), 60))
		}
	})
	return p
}

// buildTools builds kube-apiserver, kube-controller-manager, kube-scheduler
// and etcd once per version and returns their directory.
func buildTools(t *testing.T, e *env) string {
	t.Helper()
	start := time.Now()
	build := exec.CommandContext(t.Context(), filepath.Join(testenv.RepoRoot(), "test", "e2e", "aggregation", "tools", "build.sh"))
	build.Stderr = os.Stderr
	out, err := build.Output()
	if err != nil {
		t.Fatalf("tools/build.sh: %v", err)
	}
	e.buildToolsTaken = time.Since(start)
	return strings.TrimSpace(string(out))
}

// buildServer builds dra-apiserver into the test's directory.
func buildServer(t *testing.T, e *env) string {
	t.Helper()
	draBinary := filepath.Join(e.dir, "dra-apiserver")
	err := launcher.Build("./cmd/dra-apiserver", draBinary,
		"-X k8s.io/component-base/version.gitVersion=v0.1.0-aggregation", "-X k8s.io/component-base/version.gitMajor=0", "-X k8s.io/component-base/version.gitMinor=1")
	if err != nil {
		t.Fatal(err)
	}
	return draBinary
}

// startHost starts the host cluster's etcd and kube-apiserver, with
// extraArgs added to the kube-apiserver's, writes e.hostKubeconfig (an
// admin of the cluster) and waits until the kube-apiserver is ready. It
// returns etcd's URL.
func (e *env) startHost(t *testing.T, toolsDir string, extraArgs ...string) string {
	t.Helper()
	var err error
	// Certificates: one CA for the cluster (serving + clients), one for
	// the front proxy, as kubeadm does.
	pki := filepath.Join(e.dir, "pki")
	if err := os.MkdirAll(pki, 0o700); err != nil {
		t.Fatal(err)
	}
	clusterCA := newTestCA(t, pki, "cluster-ca")
	frontProxyCA := newTestCA(t, pki, "front-proxy-ca")
	loopback := []net.IP{net.ParseIP("127.0.0.1")}
	servingCert, servingKey := clusterCA.issue(t, pki, "apiserver", pkix.Name{CommonName: "kube-apiserver"}, x509.ExtKeyUsageServerAuth,
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"}, loopback)
	adminCert, adminKey := clusterCA.issue(t, pki, "admin", pkix.Name{CommonName: "admin", Organization: []string{"system:masters"}}, x509.ExtKeyUsageClientAuth, nil, nil)
	proxyCert, proxyKey := frontProxyCA.issue(t, pki, "front-proxy-client", pkix.Name{CommonName: "front-proxy-client"}, x509.ExtKeyUsageClientAuth, nil, nil)
	saKey, saPub := serviceAccountKey(t, pki)
	if e.frontProxyCert, err = tls.LoadX509KeyPair(proxyCert, proxyKey); err != nil {
		t.Fatal(err)
	}

	// etcd.
	etcdClient, etcdPeer := testenv.MustFreePort(t), testenv.MustFreePort(t)
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdClient)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPeer)
	startProcess(t, "etcd", filepath.Join(toolsDir, "etcd"),
		"--name=e2e", "--data-dir="+filepath.Join(e.dir, "etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=e2e="+peerURL, "--log-level=warn", "--quota-backend-bytes=1073741824")

	// kube-apiserver.
	start := time.Now()
	apiPort := testenv.MustFreePort(t)
	e.clusterCAFile = clusterCA.file
	e.apiPort = apiPort
	args := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port=" + strconv.Itoa(apiPort),
		"--cert-dir=" + filepath.Join(e.dir, "apiserver-certs"),
		"--tls-cert-file=" + servingCert, "--tls-private-key-file=" + servingKey,
		"--client-ca-file=" + clusterCA.file,
		"--service-account-key-file=" + saPub, "--service-account-signing-key-file=" + saKey,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-cluster-ip-range=10.96.0.0/16",
		"--authorization-mode=RBAC",
		"--requestheader-client-ca-file=" + frontProxyCA.file,
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + proxyCert, "--proxy-client-key-file=" + proxyKey,
		// Resolve the APIService's Service by its ExternalName
		// (127.0.0.1) instead of its endpoints, which may not be
		// loopback addresses.
		"--enable-aggregator-routing=false",
		// The kubernetes Service's endpoint may not be a loopback
		// address either.
		"--endpoint-reconciler-type=none",
		"--v=1",
	}
	e.apiserver = startProcessP(t, "kube-apiserver", filepath.Join(toolsDir, "kube-apiserver"), append(args, extraArgs...)...)
	apiserverExited := e.apiserver.Exited()
	e.hostKubeconfig = filepath.Join(e.dir, "host.kubeconfig")
	writeFile(t, e.hostKubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: host
  cluster:
    server: https://127.0.0.1:%d
    certificate-authority: %s
users:
- name: admin
  user:
    client-certificate: %s
    client-key: %s
contexts:
- name: host
  context: {cluster: host, user: admin}
current-context: host
`, apiPort, clusterCA.file, adminCert, adminKey)))
	poll(t, "kube-apiserver /readyz", func() (bool, error) {
		if err := exitedErr(apiserverExited); err != nil {
			return false, err
		}
		_, err := e.kubectl("get", "--raw=/readyz")
		return err == nil, nil
	})
	e.apiserverReady = time.Since(start)
	return etcdURL
}

// applyDeploy applies deploy/<variant> as an operator does, server-side,
// with one overlay: the Service becomes an ExternalName for 127.0.0.1 on
// e.draPort, picked here (with --enable-aggregator-routing=false the
// aggregator dials it), and the APIServices name that port. The
// Deployment is created but never run: no kubelet. It returns a
// kubeconfig with a token of the Deployment's ServiceAccount, as a pod's
// projected token would be, for the server to run as: only deploy/'s RBAC
// grants it anything.
func (e *env) applyDeploy(t *testing.T, variant string) string {
	t.Helper()
	e.draPort, e.draPort2 = testenv.MustFreePort(t), testenv.MustFreePort(t)
	overlay := filepath.Join(e.dir, "deploy-overlay")
	if err := os.MkdirAll(overlay, 0o755); err != nil {
		t.Fatal(err)
	}
	deployDir, err := filepath.Rel(overlay, filepath.Join(testenv.RepoRoot(), "deploy", variant))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(overlay, "kustomization.yaml"), []byte(fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- %s
patches:
- target: {kind: Service, name: draplane}
  patch: |-
    - op: replace
      path: /spec
      value: {type: ExternalName, externalName: 127.0.0.1, ports: [{name: https, port: %d}]}
- target: {kind: APIService}
  patch: |-
    - op: replace
      path: /spec/service/port
      value: %d
`, deployDir, e.draPort, e.draPort)))
	if out, err := e.kubectl("apply", "--server-side", "--field-manager="+e2eFieldManager, "-k", overlay); err != nil {
		t.Fatalf("kubectl apply --server-side -k deploy/%s (overlay): %v\n%s", variant, err, out)
	}
	if out, err := e.kubectl("get", "deployment", "-n", "draplane-system", "draplane", "-o", "jsonpath={.spec.template.spec.serviceAccountName}"); err != nil || out != "draplane" {
		t.Fatalf("the Deployment of deploy/%s: %v %q", variant, err, out)
	}
	token, err := e.kubectl("create", "token", "draplane", "-n", "draplane-system", "--duration=2h")
	if err != nil {
		t.Fatalf("kubectl create token: %v\n%s", err, token)
	}
	e.serverToken = token
	serverKubeconfig := filepath.Join(e.dir, "draplane.kubeconfig")
	writeFile(t, serverKubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: host
  cluster:
    server: https://127.0.0.1:%d
    certificate-authority: %s
users:
- name: draplane
  user:
    token: %s
contexts:
- name: host
  context: {cluster: host, user: draplane}
current-context: host
`, e.apiPort, e.clusterCAFile, token)))
	return serverKubeconfig
}
