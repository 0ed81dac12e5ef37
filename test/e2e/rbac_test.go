package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// rbacIdentity is one client of the RBAC matrix, with a kubeconfig minted
// by `dra-apiserver client-kubeconfig` (a real certificate signed by the
// data dir's CA), and what it is expected to be allowed.
type rbacIdentity struct {
	name       string
	kubeconfig string
	client     *http.Client
	allowed    func(req rbacRequest) bool
}

// rbacRequest is one request of the matrix: a verb on a resource (with
// subresource) of a group, in a namespace ("" cluster-wide).
type rbacRequest struct {
	group, resource, subresource, verb, namespace string
}

// rbacKind is a resource of the matrix and the subresources it is asked
// about.
type rbacKind struct {
	group, resource string
	namespaced      bool
	subresources    []string
}

const rbacNamespace = "rbac-matrix"

// mintKubeconfig runs `dra-apiserver client-kubeconfig` for user and
// groups and returns the kubeconfig's path.
func mintKubeconfig(t *testing.T, s *testServer, user string, groups ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), strings.ReplaceAll(user, ":", "_")+".kubeconfig")
	args := []string{"client-kubeconfig", "--data-dir", s.dataDir, "--user", user, "--output", path}
	for _, g := range groups {
		args = append(args, "--group", g)
	}
	if out, err := exec.Command(serverBinary, args...).CombinedOutput(); err != nil {
		t.Fatalf("client-kubeconfig: %v\n%s", err, out)
	}
	return path
}

func httpClientFor(t *testing.T, kubeconfig string) *http.Client {
	t.Helper()
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client, err := rest.HTTPClientFor(config)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// statusOf sends a request and returns its status code without reading
// more than the headers (a watch that is allowed stays open).
func statusOf(t *testing.T, s *testServer, client *http.Client, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
		if method == http.MethodPatch {
			req.Header.Set("Content-Type", "application/merge-patch+json")
		}
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var message string
	if resp.StatusCode == http.StatusForbidden {
		buf := make([]byte, 2048)
		n, _ := resp.Body.Read(buf)
		message = string(buf[:n])
	}
	return resp.StatusCode, message
}

// url is the path of a request: the object "rbac-x" for verbs on one
// object, the collection otherwise; writes are dry runs.
func (r rbacRequest) url(k rbacKind) string {
	prefix := "/apis/" + k.group + "/v1"
	if k.group == "" {
		prefix = "/api/v1"
	}
	if r.namespace != "" {
		prefix += "/namespaces/" + r.namespace
	}
	path := prefix + "/" + k.resource
	switch r.verb {
	case "get", "update", "patch", "delete":
		path += "/rbac-x"
	}
	if r.subresource != "" {
		path = prefix + "/" + k.resource + "/rbac-x/" + r.subresource
	}
	switch r.verb {
	case "watch":
		path += "?watch=true&timeoutSeconds=1"
	case "create", "update", "patch", "delete", "deletecollection":
		path += "?dryRun=All"
	}
	return path
}

func (r rbacRequest) method() string {
	return map[string]string{
		"get": "GET", "list": "GET", "watch": "GET", "create": "POST", "update": "PUT",
		"patch": "PATCH", "delete": "DELETE", "deletecollection": "DELETE",
	}[r.verb]
}

// body is a request body that passes authorization; the server may
// refuse it afterwards (404, 409, 422), which counts as allowed.
func (r rbacRequest) body() string {
	switch r.verb {
	case "create", "update":
		return `{"metadata":{"name":"rbac-x"}}`
	case "patch":
		return `{}`
	}
	return ""
}

func in(value string, values ...string) bool { return slices.Contains(values, value) }

var (
	readVerbs  = []string{"get", "list", "watch"}
	writeVerbs = []string{"create", "update", "patch", "delete", "deletecollection"}
	dra        = []string{"resource.draplane.dev", "resource.k8s.io"}
)

// TestRBACMatrix: admin, edit (a RoleBinding in one namespace), view (a
// ClusterRoleBinding), a user without bindings and two node-bound driver
// identities, each with a certificate minted by client-kubeconfig, send
// every verb to every resource and subresource, in the bound namespace,
// another one and cluster-wide; each answer is a 403 exactly where the
// default roles say so.
func TestRBACMatrix(t *testing.T) {
	s := sharedServer(t)
	s.MustKubectl(t, "", "create", "namespace", rbacNamespace)
	t.Cleanup(func() { _, _ = s.Kubectl(t, "", "delete", "namespace", rbacNamespace, "--wait=false") })
	s.MustKubectl(t, "", "create", "rolebinding", "rbac-editor", "--clusterrole=edit", "--user=rbac-editor", "-n", rbacNamespace)
	s.MustKubectl(t, "", "create", "clusterrolebinding", "rbac-viewer", "--clusterrole=view", "--user=rbac-viewer")
	t.Cleanup(func() { _, _ = s.Kubectl(t, "", "delete", "clusterrolebinding", "rbac-viewer") })

	viewable := func(r rbacRequest) bool {
		switch {
		case r.group == "":
			return in(r.resource+r.subresource, "pods", "podsstatus", "events", "namespaces", "namespacesstatus")
		case in(r.group, dra...):
			return in(r.resource+r.subresource, "resourceclaims", "resourceclaimsstatus", "resourceclaimtemplates") ||
				r.group == "resource.draplane.dev" && r.resource == "resourcepools"
		}
		return false
	}
	driverRules := func(r rbacRequest) bool {
		res := r.resource
		if r.subresource != "" {
			res += "/" + r.subresource
		}
		switch {
		case in(r.group, dra...) && res == "resourceslices":
			return true
		case in(r.group, dra...) && res == "deviceclasses":
			return in(r.verb, readVerbs...)
		case in(r.group, dra...) && res == "resourceclaims":
			return r.verb == "get"
		case in(r.group, dra...) && res == "resourceclaims/status":
			return in(r.verb, "get", "update", "patch")
		case r.group == "" && in(res, "nodes", "nodes/status"):
			return in(r.verb, "get", "list", "watch", "create", "update", "patch")
		case r.group == "" && res == "pods":
			return in(r.verb, readVerbs...)
		case r.group == "" && res == "pods/status":
			return in(r.verb, "get", "update", "patch")
		case r.group == "" && res == "events":
			return in(r.verb, "create", "update", "patch")
		}
		return false
	}
	// The node restriction narrows the role for node-bound identities:
	// claims only by name when allocated on their node (none is, here),
	// slices removed as a collection only for their node, only their own
	// Node written, only their pods' status. Writes the admission plugin
	// checks are refused after validation, so a create without a spec is
	// a 422 (authorized), a node of another name a 403.
	nodeDriverRules := func(r rbacRequest) bool {
		switch {
		case in(r.group, dra...) && r.resource == "resourceclaims":
			return false
		case in(r.group, dra...) && r.resource == "resourceslices" && r.verb == "deletecollection":
			return false
		case r.group == "" && r.resource == "nodes" && in(r.verb, "create", "update", "patch", "delete"):
			return false
		case r.group == "" && r.resource == "pods" && r.subresource == "status" && in(r.verb, "update", "patch"):
			return false
		}
		return driverRules(r)
	}
	identities := []rbacIdentity{
		{name: "admin", kubeconfig: s.Kubeconfig, allowed: func(rbacRequest) bool { return true }},
		{name: "edit", kubeconfig: mintKubeconfig(t, s, "rbac-editor"), allowed: func(r rbacRequest) bool {
			if r.namespace != rbacNamespace {
				return false
			}
			res := r.resource + "/" + r.subresource
			switch {
			case in(r.verb, readVerbs...) && viewable(r):
				return true
			case r.group == "" && in(res, "pods/", "events/") && in(r.verb, writeVerbs...):
				return true
			case r.group == "" && res == "pods/eviction":
				return r.verb == "create"
			case r.group == "coordination.k8s.io" && res == "leases/":
				return true
			case in(r.group, dra...) && in(res, "resourceclaims/", "resourceclaimtemplates/") && in(r.verb, writeVerbs...):
				return true
			}
			return false
		}},
		{name: "view", kubeconfig: mintKubeconfig(t, s, "rbac-viewer"), allowed: func(r rbacRequest) bool {
			return in(r.verb, readVerbs...) && viewable(r)
		}},
		{name: "no binding", kubeconfig: mintKubeconfig(t, s, "rbac-nobody", "rbac-strangers"), allowed: func(rbacRequest) bool { return false }},
		{name: "node A's driver", kubeconfig: mintKubeconfig(t, s, "draplane:node:rbac-node-a", "draplane:nodes", "draplane:driver:gpu.example.com"), allowed: nodeDriverRules},
		{name: "node B's driver", kubeconfig: mintKubeconfig(t, s, "draplane:node:rbac-node-b", "draplane:nodes", "draplane:driver:gpu.example.com"), allowed: nodeDriverRules},
	}
	for i := range identities {
		identities[i].client = httpClientFor(t, identities[i].kubeconfig)
	}

	kinds := []rbacKind{
		{group: "", resource: "pods", namespaced: true, subresources: []string{"status", "eviction"}},
		{group: "", resource: "events", namespaced: true},
		{group: "", resource: "nodes", subresources: []string{"status"}},
		{group: "", resource: "namespaces", subresources: []string{"status"}},
		{group: "coordination.k8s.io", resource: "leases", namespaced: true},
		{group: "rbac.authorization.k8s.io", resource: "roles", namespaced: true},
		{group: "rbac.authorization.k8s.io", resource: "clusterroles"},
		{group: "resource.draplane.dev", resource: "resourcepools"},
	}
	for _, group := range dra {
		kinds = append(kinds,
			rbacKind{group: group, resource: "resourceclaims", namespaced: true, subresources: []string{"status"}},
			rbacKind{group: group, resource: "resourceclaimtemplates", namespaced: true},
			rbacKind{group: group, resource: "resourceslices"},
			rbacKind{group: group, resource: "deviceclasses"},
		)
	}
	verbs := []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}

	checked, mismatches := 0, 0
	for _, who := range identities {
		for _, k := range kinds {
			namespaces := []string{""}
			if k.namespaced {
				namespaces = []string{rbacNamespace, "default"}
			}
			for _, ns := range namespaces {
				var requests []rbacRequest
				for _, verb := range verbs {
					requests = append(requests, rbacRequest{group: k.group, resource: k.resource, verb: verb, namespace: ns})
				}
				for _, sub := range k.subresources {
					subVerbs := []string{"get", "update", "patch"}
					if sub == "eviction" {
						subVerbs = []string{"create"}
					}
					for _, verb := range subVerbs {
						requests = append(requests, rbacRequest{group: k.group, resource: k.resource, subresource: sub, verb: verb, namespace: ns})
					}
				}
				for _, req := range requests {
					path := req.url(k)
					method := req.method()
					if req.subresource == "eviction" {
						method = "POST"
					}
					code, message := statusOf(t, s, who.client, method, path, req.body())
					checked++
					if code == http.StatusUnauthorized {
						t.Errorf("%s: %s %s: 401, the certificate was not accepted", who.name, method, path)
					}
					if got, want := code != http.StatusForbidden, who.allowed(req); got != want {
						mismatches++
						t.Errorf("%s: %s %s: status %d, want allowed=%v %s", who.name, method, path, code, want, message)
					}
				}
			}
		}
	}
	summary := fmt.Sprintf("rbac matrix: %d identities, %d requests checked, %d mismatches", len(identities), checked, mismatches)
	t.Log(summary)
	fmt.Fprintln(os.Stderr, summary)
}

// TestKubectlAuth: kubectl auth whoami and auth can-i (with --list)
// answer for a user with a minted certificate.
func TestKubectlAuth(t *testing.T) {
	requireKubectl(t)
	s := sharedServer(t)
	kubeconfig := mintKubeconfig(t, s, "rbac-whoami", "rbac-team")
	s.MustKubectl(t, "", "create", "namespace", "rbac-whoami")
	t.Cleanup(func() { _, _ = s.Kubectl(t, "", "delete", "namespace", "rbac-whoami", "--wait=false") })
	s.MustKubectl(t, "", "create", "rolebinding", "team-view", "--clusterrole=view", "--group=rbac-team", "-n", "rbac-whoami")
	kubectl := func(args ...string) (string, error) {
		cmd := exec.Command(kubectlPath, append([]string{"--kubeconfig", kubeconfig, "--cache-dir", filepath.Join(t.TempDir(), "cache")}, args...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := kubectl("auth", "whoami")
	if err != nil || !strings.Contains(out, "rbac-whoami") || !strings.Contains(out, "[rbac-team system:authenticated]") {
		t.Errorf("kubectl auth whoami: %v\n%s", err, out)
	}
	out, err = kubectl("auth", "can-i", "--list", "-n", "rbac-whoami")
	if err != nil || !strings.Contains(out, "resourceclaims.resource.draplane.dev") || !strings.Contains(out, "[get list watch]") {
		t.Errorf("kubectl auth can-i --list: %v\n%s", err, out)
	}
	if out, err := kubectl("auth", "can-i", "list", "pods", "-n", "rbac-whoami"); err != nil || strings.TrimSpace(out) != "yes" {
		t.Errorf("can-i list pods in the bound namespace: %v %q, want yes", err, out)
	}
	if out, _ := kubectl("auth", "can-i", "list", "pods", "-n", "default"); strings.TrimSpace(out) != "no" {
		t.Errorf("can-i list pods in default: %q, want no", out)
	}
	// Escalation: a namespace admin may bind roles whose rules it holds
	// there, not cluster-admin.
	s.MustKubectl(t, "", "create", "rolebinding", "team-admin", "--clusterrole=admin", "--group=rbac-team", "-n", "rbac-whoami")
	if out, err := kubectl("create", "rolebinding", "friend-view", "--clusterrole=view", "--user=friend", "-n", "rbac-whoami"); err != nil {
		t.Errorf("namespace admin binding view: %v\n%s", err, out)
	}
	if out, err := kubectl("create", "rolebinding", "self-cluster-admin", "--clusterrole=cluster-admin", "--user=rbac-whoami", "-n", "rbac-whoami"); err == nil || !strings.Contains(out, "attempting to grant RBAC permissions not currently held") {
		t.Errorf("binding cluster-admin without holding it: %v\n%s", err, out)
	}
}

// expectForbidden reports an answer that is not a 403 naming reason.
func expectForbidden(t *testing.T, what string, code int, answer, reason string) {
	t.Helper()
	if code != http.StatusForbidden || !strings.Contains(answer, reason) {
		t.Errorf("%s: status %d, want 403 naming %q: %.600s", what, code, reason, answer)
	} else {
		t.Logf("%s: 403: %.400s", what, answer)
	}
}

// checkNodeRestrictionOfUpdates: the stores of slices and claim status
// refuse a node's updates as the admission chain did before it stopped
// handling updates, in both API groups, for updates, patches, applies
// and dry runs alike: node A may not touch node B's slice restrict-b-gpu,
// node B may change only status.devices of claim restrict-claim-b.
func checkNodeRestrictionOfUpdates(t *testing.T, s *testServer, nodeA, nodeB *http.Client) {
	const refusedSlice = `is forbidden: node restriction: draplane:node:restrict-a may only write ResourceSlices with spec.nodeName restrict-a; slice restrict-b-gpu has \"restrict-b\"`
	const refusedClaim = `is forbidden: node restriction: draplane:node:restrict-b may only change status.devices of claim default/restrict-claim-b`
	const reservedFor = `{"status":{"reservedFor":[{"resource":"pods","name":"p","uid":"u"}]}}`
	for _, group := range []string{"resource.draplane.dev", "resource.k8s.io"} {
		slice := "/apis/" + group + "/v1/resourceslices/restrict-b-gpu"
		sliceRefused := `resourceslices.` + group + ` \"restrict-b-gpu\" ` + refusedSlice
		code, answer := httpDo(t, s, nodeA, "PATCH", slice, "application/merge-patch+json", `{"metadata":{"labels":{"changed-by":"restrict-a"}}}`)
		expectForbidden(t, group+": node A patching node B's slice", code, answer, sliceRefused)
		code, answer = httpDo(t, s, nodeA, "PATCH", slice+"?dryRun=All", "application/merge-patch+json", `{"metadata":{"labels":{"changed-by":"restrict-a"}}}`)
		expectForbidden(t, group+": node A patching node B's slice, dry run", code, answer, sliceRefused)
		code, answer = httpDo(t, s, nodeA, "PATCH", slice+"?fieldManager=restrict-a", "application/apply-patch+yaml",
			`{"apiVersion":"`+group+`/v1","kind":"ResourceSlice","metadata":{"name":"restrict-b-gpu","labels":{"applied-by":"restrict-a"}}}`)
		expectForbidden(t, group+": node A applying to node B's slice", code, answer, sliceRefused)
		if code, stored := httpDo(t, s, nodeA, "GET", slice, "", ""); code != http.StatusOK {
			t.Errorf("%s: node A reading node B's slice: status %d: %.500s", group, code, stored)
		} else {
			code, answer = httpDo(t, s, nodeA, "PUT", slice, "application/json", stored)
			expectForbidden(t, group+": node A updating node B's slice", code, answer, sliceRefused)
		}

		claimStatus := "/apis/" + group + "/v1/namespaces/default/resourceclaims/restrict-claim-b/status"
		claimRefused := `resourceclaims.` + group + ` \"restrict-claim-b\" ` + refusedClaim
		code, answer = httpDo(t, s, nodeB, "PATCH", claimStatus, "application/merge-patch+json", reservedFor)
		expectForbidden(t, group+": node B writing status.reservedFor", code, answer, claimRefused)
		code, answer = httpDo(t, s, nodeB, "PATCH", claimStatus+"?dryRun=All", "application/merge-patch+json", reservedFor)
		expectForbidden(t, group+": node B writing status.reservedFor, dry run", code, answer, claimRefused)
	}
}

// TestNodeRestriction: node A's driver publishes slices of its node for
// the drivers it holds a group for, and nothing else; it reads the claims
// allocated on its node and no others; each refusal is a 403 naming the
// rule. Without the node authorizer and admission (RBAC alone), node A
// could do all of it.
func TestNodeRestriction(t *testing.T) {
	s := sharedServer(t)
	admin, err := rest.HTTPClientFor(s.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	nodeA := httpClientFor(t, mintKubeconfig(t, s, "draplane:node:restrict-a", "draplane:nodes", "draplane:driver:gpu.example.com"))
	nodeB := httpClientFor(t, mintKubeconfig(t, s, "draplane:node:restrict-b", "draplane:nodes", "draplane:driver:gpu.example.com"))
	slice := func(name, node, driver string) string {
		return `{"apiVersion":"resource.draplane.dev/v1","kind":"ResourceSlice","metadata":{"name":"` + name + `"},"spec":{"driver":"` + driver +
			`","nodeName":"` + node + `","pool":{"name":"` + node + `","generation":1,"resourceSliceCount":1},"devices":[{"name":"d0"}]}}`
	}
	const slices = "/apis/resource.draplane.dev/v1/resourceslices"
	expectForbidden := func(what string, code int, answer, reason string) {
		t.Helper()
		expectForbidden(t, what, code, answer, reason)
	}

	if code, answer := httpDo(t, s, nodeA, "POST", slices, "application/json", slice("restrict-a-gpu", "restrict-a", "gpu.example.com")); code != http.StatusCreated {
		t.Errorf("node A publishing its own slice: status %d: %.500s", code, answer)
	}
	code, answer := httpDo(t, s, nodeA, "POST", slices, "application/json", slice("restrict-b-by-a", "restrict-b", "gpu.example.com"))
	expectForbidden("node A writing a slice of node B", code, answer, "may only write ResourceSlices with spec.nodeName restrict-a")
	code, answer = httpDo(t, s, nodeA, "POST", slices, "application/json", slice("restrict-a-nic", "restrict-a", "nic.example.com"))
	expectForbidden("node A publishing for a driver it is not allowed", code, answer, "lacks the group draplane:driver:nic.example.com")
	if code, answer := httpDo(t, s, nodeB, "POST", slices, "application/json", slice("restrict-b-gpu", "restrict-b", "gpu.example.com")); code != http.StatusCreated {
		t.Errorf("node B publishing its own slice: status %d: %.500s", code, answer)
	}
	code, answer = httpDo(t, s, nodeA, "PATCH", slices+"/restrict-b-gpu", "application/merge-patch+json", `{"metadata":{"labels":{"changed-by":"restrict-a"}}}`)
	expectForbidden("node A changing node B's slice", code, answer, `spec.nodeName restrict-a; slice restrict-b-gpu has \"restrict-b\"`)
	code, answer = httpDo(t, s, nodeA, "DELETE", slices+"/restrict-b-gpu", "", "")
	expectForbidden("node A deleting node B's slice", code, answer, "may only write ResourceSlices with spec.nodeName restrict-a")

	// A claim allocated on node B.
	const claims = "/apis/resource.draplane.dev/v1/namespaces/default/resourceclaims"
	claim := `{"apiVersion":"resource.draplane.dev/v1","kind":"ResourceClaim","metadata":{"name":"restrict-claim-b"},"spec":{"devices":{"requests":[` +
		`{"name":"gpu","exactly":{"deviceClassName":"gpu.example.com"}},{"name":"nic","exactly":{"deviceClassName":"nic.example.com"}}]}}}`
	if code, answer := httpDo(t, s, admin, "POST", claims, "application/json", claim); code != http.StatusCreated {
		t.Fatalf("admin creating the claim: status %d: %.500s", code, answer)
	}
	allocation := `{"status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":"gpu.example.com","pool":"restrict-b","device":"d0"},` +
		`{"request":"nic","driver":"nic.example.com","pool":"restrict-b","device":"n0"}]},` +
		`"nodeSelector":{"nodeSelectorTerms":[{"matchFields":[{"key":"metadata.name","operator":"In","values":["restrict-b"]}]}]}}}}`
	if code, answer := httpDo(t, s, admin, "PATCH", claims+"/restrict-claim-b/status", "application/merge-patch+json", allocation); code != http.StatusOK {
		t.Fatalf("admin allocating the claim: status %d: %.500s", code, answer)
	}
	// The node authorizer reads claims from its cache: wait until node B
	// may read it (no timed assertion: the first success ends the wait).
	for range 200 {
		if code, _ := httpDo(t, s, nodeB, "GET", claims+"/restrict-claim-b", "", ""); code == http.StatusOK {
			break
		}
	}
	if code, answer := httpDo(t, s, nodeB, "GET", claims+"/restrict-claim-b", "", ""); code != http.StatusOK {
		t.Errorf("node B reading the claim allocated on it: status %d: %.500s", code, answer)
	}
	code, answer = httpDo(t, s, nodeA, "GET", claims+"/restrict-claim-b", "", "")
	expectForbidden("node A reading a claim allocated on node B", code, answer, "may only read and write ResourceClaims allocated on node restrict-a; claim default/restrict-claim-b is not")
	code, answer = httpDo(t, s, nodeA, "PATCH", claims+"/restrict-claim-b/status", "application/merge-patch+json", `{"status":{"devices":[]}}`)
	expectForbidden("node A writing the status of a claim allocated on node B", code, answer, "claim default/restrict-claim-b is not")
	code, answer = httpDo(t, s, nodeB, "PATCH", claims+"/restrict-claim-b/status", "application/merge-patch+json", `{"status":{"reservedFor":[{"resource":"pods","name":"p","uid":"u"}]}}`)
	expectForbidden("node B writing more than status.devices", code, answer, "may only change status.devices")
	// Node B holds gpu.example.com only: the status of the claim's NIC is
	// the NIC driver's to write.
	deviceStatus := func(driver, device, message string) string {
		return `{"status":{"devices":[{"driver":"` + driver + `","pool":"restrict-b","device":"` + device +
			`","conditions":[{"type":"Ready","status":"True","reason":"Configured","message":"` + message + `","lastTransitionTime":"2026-01-01T00:00:00Z"}]}]}}`
	}
	code, answer = httpDo(t, s, nodeB, "PATCH", claims+"/restrict-claim-b/status", "application/merge-patch+json", deviceStatus("nic.example.com", "n0", "by node B"))
	expectForbidden("node B writing the status of another driver's device", code, answer, "may not write the status of devices of driver nic.example.com: it lacks the group draplane:driver:nic.example.com")
	if code, answer := httpDo(t, s, nodeB, "PATCH", claims+"/restrict-claim-b/status", "application/merge-patch+json", deviceStatus("gpu.example.com", "d0", "by node B")); code != http.StatusOK {
		t.Errorf("node B writing the status of its driver's device: status %d: %.500s", code, answer)
	}
	if code, answer := httpDo(t, s, admin, "PATCH", claims+"/restrict-claim-b/status", "application/merge-patch+json", deviceStatus("nic.example.com", "n0", "by the NIC driver")); code != http.StatusOK {
		t.Errorf("admin writing the NIC's status: status %d: %.500s", code, answer)
	}
	code, answer = httpDo(t, s, nodeB, "PATCH", claims+"/restrict-claim-b/status", "application/merge-patch+json", deviceStatus("gpu.example.com", "d0", "by node B"))
	expectForbidden("node B's write that drops another driver's device status", code, answer, "may not write the status of devices of driver nic.example.com")
	checkNodeRestrictionOfUnselectedClaims(t, s, admin, nodeA, nodeB)
	code, answer = httpDo(t, s, nodeA, "PATCH", "/api/v1/nodes/restrict-b", "application/merge-patch+json", `{"metadata":{"labels":{"x":"y"}}}`)
	expectForbidden("node A writing node B", code, answer, "may only write its own Node restrict-a")
	code, answer = httpDo(t, s, nodeA, "DELETE", slices+"?fieldSelector=spec.nodeName%3Drestrict-b", "", "")
	expectForbidden("node A deleting node B's slices as a collection", code, answer, "field selector spec.nodeName=restrict-a")
	checkNodeRestrictionOfUpdates(t, s, nodeA, nodeB)
	if code, answer := httpDo(t, s, nodeA, "DELETE", slices+"?fieldSelector=spec.nodeName%3Drestrict-a", "", ""); code != http.StatusOK {
		t.Errorf("node A deleting its own slices as a collection: status %d: %.500s", code, answer)
	}
	_, _ = httpDo(t, s, admin, "DELETE", slices+"/restrict-b-gpu", "", "")
	_, _ = httpDo(t, s, admin, "DELETE", claims+"/restrict-claim-b", "", "")
}

// checkNodeRestrictionOfUnselectedClaims: a claim of devices reachable
// from every node (allocated without a node selector) is read and written
// only by the nodes of the pods it is reserved for, as upstream's Node
// authorizer lets a kubelet read only its pods' claims.
func checkNodeRestrictionOfUnselectedClaims(t *testing.T, s *testServer, admin, nodeA, nodeB *http.Client) {
	t.Helper()
	const claims = "/apis/resource.draplane.dev/v1/namespaces/default/resourceclaims"
	pod := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"restrict-pod-b"},"spec":{"nodeName":"restrict-b","containers":[{"name":"main","image":"busybox"}]}}`
	code, answer := httpDo(t, s, admin, "POST", "/api/v1/namespaces/default/pods", "application/json", pod)
	if code != http.StatusCreated {
		t.Fatalf("admin creating a pod on node B: status %d: %.500s", code, answer)
	}
	var created struct {
		Metadata struct{ UID string } `json:"metadata"`
	}
	if err := json.Unmarshal([]byte(answer), &created); err != nil {
		t.Fatal(err)
	}
	claim := `{"apiVersion":"resource.draplane.dev/v1","kind":"ResourceClaim","metadata":{"name":"restrict-claim-anywhere"},"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpu.example.com"}}]}}}`
	if code, answer := httpDo(t, s, admin, "POST", claims, "application/json", claim); code != http.StatusCreated {
		t.Fatalf("admin creating the claim: status %d: %.500s", code, answer)
	}
	status := `{"status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":"gpu.example.com","pool":"fabric","device":"d0"}]}},` +
		`"reservedFor":[{"resource":"pods","name":"restrict-pod-b","uid":"` + created.Metadata.UID + `"}]}}`
	if code, answer := httpDo(t, s, admin, "PATCH", claims+"/restrict-claim-anywhere/status", "application/merge-patch+json", status); code != http.StatusOK {
		t.Fatalf("admin allocating the claim: status %d: %.500s", code, answer)
	}
	for range 200 {
		if code, _ := httpDo(t, s, nodeB, "GET", claims+"/restrict-claim-anywhere", "", ""); code == http.StatusOK {
			break
		}
	}
	if code, answer := httpDo(t, s, nodeB, "GET", claims+"/restrict-claim-anywhere", "", ""); code != http.StatusOK {
		t.Errorf("node B reading the claim of its pod: status %d: %.500s", code, answer)
	}
	code, answer = httpDo(t, s, nodeA, "GET", claims+"/restrict-claim-anywhere", "", "")
	expectForbidden(t, "node A reading a claim without node selector that only a pod on node B uses", code, answer, "claim default/restrict-claim-anywhere is used by no pod on it")
	code, answer = httpDo(t, s, nodeA, "PATCH", claims+"/restrict-claim-anywhere/status", "application/merge-patch+json", `{"status":{"devices":[]}}`)
	expectForbidden(t, "node A writing it", code, answer, "is used by no pod on it")
	_, _ = httpDo(t, s, admin, "DELETE", claims+"/restrict-claim-anywhere", "", "")
	_, _ = httpDo(t, s, admin, "DELETE", "/api/v1/namespaces/default/pods/restrict-pod-b", "", "")
}
