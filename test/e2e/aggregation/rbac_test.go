package aggregation

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/draplane/draplane/internal/testing/testenv"
)

// A use is one kind of request the server makes to the host cluster as
// its ServiceAccount, and why. Every verb of every rule deploy/ grants the
// server must have one; every request the server made must be one.
type use struct {
	verb, group, resource, subresource string
	// namespace and name for the SubjectAccessReview (where the server
	// makes the request).
	namespace, name string
	why             string
	// notReached says why the flow of this test does not make the
	// request (it is still checked by SubjectAccessReview).
	notReached string
}

func (u use) String() string {
	r := u.resource
	if u.subresource != "" {
		r += "/" + u.subresource
	}
	if u.group != "" {
		r += "." + u.group
	}
	return u.verb + " " + r
}

// watchListFallback: informers list by a watch-list stream (client-go's
// WatchListClient, on by default since 1.35), which the kube-apiserver
// authorizes as watch; against a host that does not serve it they fall
// back to a plain list.
const watchListFallback = "the informer lists by a watch-list stream here; list is its fallback against hosts without watch-list"

// hostWithoutPodGroups: the test's kube-apiserver runs with its default
// gates, so it does not serve scheduling.k8s.io/v1beta1 PodGroups
// (GenericWorkload) and the controllers do not use them.
const hostWithoutPodGroups = "only where the host serves scheduling.k8s.io/v1beta1 PodGroups (GenericWorkload), which the test's kube-apiserver does not"

// uses is the table of docs/operators.md, "Aggregated mode".
var uses = []use{
	// system:auth-delegator
	{verb: "create", group: "authentication.k8s.io", resource: "tokenreviews", why: "authenticate bearer tokens sent to the server directly"},
	{verb: "create", group: "authorization.k8s.io", resource: "subjectaccessreviews", why: "authorize every request (delegated authorization)"},
	// extension-apiserver-authentication-reader (kube-system)
	{verb: "get", resource: "configmaps", namespace: "kube-system", name: "extension-apiserver-authentication", why: "the front-proxy and client CAs"},
	{verb: "list", resource: "configmaps", namespace: "kube-system", name: "extension-apiserver-authentication", why: "the front-proxy and client CAs (informer)", notReached: watchListFallback},
	{verb: "watch", resource: "configmaps", namespace: "kube-system", name: "extension-apiserver-authentication", why: "the front-proxy and client CAs (informer)"},
	// draplane:controllers
	{verb: "list", resource: "pods", namespace: "default", why: "pod informer", notReached: watchListFallback},
	{verb: "watch", resource: "pods", namespace: "default", why: "pod informer"},
	{verb: "get", resource: "pods", namespace: "default", why: "re-read a pod after a conflict when pinning it, or when the informer lacks a claim's consumer",
		notReached: "only after a conflicting pod update or a missing informer entry"},
	{verb: "update", resource: "pods", namespace: "default", why: "pin a gated pod to its node (node affinity) and remove the gate, in one update"},
	{verb: "patch", resource: "pods", namespace: "default", why: "record generated claims in the resource.draplane.dev/claim-statuses annotation"},
	{verb: "delete", resource: "pods", namespace: "default", why: "evict a pod for a NoExecute device taint"},
	{verb: "patch", resource: "pods", subresource: "status", namespace: "default", why: "conditions DisruptionTarget (taint eviction) and PodScheduled=False (server-side apply)"},
	{verb: "create", resource: "pods", subresource: "eviction", namespace: "default", why: "evict the victims of a preemption (the host's PodDisruptionBudgets apply)",
		notReached: "only when a pending pod preempts others, which this flow does not make"},
	{verb: "list", resource: "nodes", why: "node informer (placement)", notReached: watchListFallback},
	{verb: "watch", resource: "nodes", why: "node informer (placement)"},
	{verb: "get", resource: "namespaces", why: "the resource.kubernetes.io/admin-access label of a claim's or template's namespace, read when it asks for admin access"},
	{verb: "list", resource: "namespaces", why: "namespace informer (admin access label)", notReached: watchListFallback},
	{verb: "watch", resource: "namespaces", why: "namespace informer (admin access label)"},
	{verb: "create", resource: "events", namespace: "default", why: "events of the controllers"},
	{verb: "patch", resource: "events", namespace: "default", why: "a repeated event's count", notReached: "only when the same event repeats"},
	{verb: "get", group: "scheduling.k8s.io", resource: "podgroups", namespace: "default", why: "a pod's PodGroup (gangs, group claims)", notReached: hostWithoutPodGroups},
	{verb: "list", group: "scheduling.k8s.io", resource: "podgroups", namespace: "default", why: "PodGroup informer (gangs, group claims)", notReached: hostWithoutPodGroups},
	{verb: "watch", group: "scheduling.k8s.io", resource: "podgroups", namespace: "default", why: "PodGroup informer (gangs, group claims)", notReached: hostWithoutPodGroups},
	{verb: "patch", group: "scheduling.k8s.io", resource: "podgroups", subresource: "status", namespace: "default", why: "PodGroupInitiallyScheduled and the group's generated claims (server-side apply)", notReached: hostWithoutPodGroups},
	// draplane:leader-election (draplane-system)
	{verb: "get", group: "coordination.k8s.io", resource: "leases", namespace: "draplane-system", name: "draplane-controllers", why: "leader election"},
	{verb: "create", group: "coordination.k8s.io", resource: "leases", namespace: "draplane-system", name: "draplane-controllers", why: "leader election, first leader"},
	{verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: "draplane-system", name: "draplane-controllers", why: "leader election, renew and release"},
	// draplane:shared-ca (draplane-system)
	{verb: "get", resource: "secrets", namespace: "draplane-system", name: "draplane-ca", why: "the CA every replica signs its serving certificate with (--shared-ca-secret)"},
	{verb: "create", resource: "secrets", namespace: "draplane-system", why: "the first replica stores its CA as the shared one"},
	// draplane:apiservice-ca-bundle
	{verb: "patch", group: "apiregistration.k8s.io", resource: "apiservices", name: "v1.resource.draplane.dev", why: "write the serving CA into spec.caBundle"},
	{verb: "patch", group: "apiregistration.k8s.io", resource: "apiservices", name: "v1beta1.resource.draplane.dev", why: "write the serving CA into spec.caBundle"},
}

// clusterSchedulerUses are the requests of draplane:scheduler
// (deploy/cluster-scheduler), made with --schedule-host-pods; docs/operators.md,
// "Use draplane as your cluster's DRA scheduler". TestClusterScheduling
// checks them as testRBAC checks uses.
var clusterSchedulerUses = []use{
	{verb: "list", group: "resource.k8s.io", resource: "resourceclaims", namespace: "default", why: "claim informer (the host's claims)", notReached: watchListFallback},
	{verb: "watch", group: "resource.k8s.io", resource: "resourceclaims", namespace: "default", why: "claim informer (the host's claims)"},
	{verb: "get", group: "resource.k8s.io", resource: "resourceclaims", namespace: "default", why: "read a claim again after a conflicting write",
		notReached: "only after a write that conflicts"},
	{verb: "create", group: "resource.k8s.io", resource: "resourceclaims", namespace: "default", why: "the claim for a pod's extended resources that devices back"},
	{verb: "update", group: "resource.k8s.io", resource: "resourceclaims", namespace: "default", why: "add upstream's finalizer before the allocation"},
	{verb: "update", group: "resource.k8s.io", resource: "resourceclaims", subresource: "status", namespace: "default", why: "allocation and reservedFor in one write"},
	{verb: "patch", group: "resource.k8s.io", resource: "resourceclaims", subresource: "status", namespace: "default", why: "add a pod to a shared claim's reservedFor",
		notReached: "only for a claim allocated already and shared by pods, which this flow does not make"},
	{verb: "update", group: "resource.k8s.io", resource: "resourceclaims", subresource: "binding", why: "the host's authorization of the allocation and reservedFor in a status update",
		notReached: "a synthetic subresource, checked within the status update, never requested on its own"},
	{verb: "patch", group: "resource.k8s.io", resource: "resourceclaims", subresource: "binding", why: "the host's authorization of reservedFor in a status patch",
		notReached: "a synthetic subresource, checked within the status patch, never requested on its own"},
	{verb: "list", group: "resource.k8s.io", resource: "resourceslices", why: "slice informer (the inventory)", notReached: watchListFallback},
	{verb: "watch", group: "resource.k8s.io", resource: "resourceslices", why: "slice informer (the inventory)"},
	{verb: "list", group: "resource.k8s.io", resource: "deviceclasses", why: "class informer (the inventory)", notReached: watchListFallback},
	{verb: "watch", group: "resource.k8s.io", resource: "deviceclasses", why: "class informer (the inventory)"},
	{verb: "list", group: "resource.k8s.io", resource: "devicetaintrules", why: "taint rule informer (taints and the ownership mark)", notReached: watchListFallback},
	{verb: "watch", group: "resource.k8s.io", resource: "devicetaintrules", why: "taint rule informer (taints and the ownership mark)"},
	{verb: "create", resource: "pods", subresource: "binding", namespace: "default", why: "bind a placed pod"},
}

// grant is one thing deploy/ gives the server that can be taken away: a
// rule of one of its roles, or a binding to a built-in role.
type grant struct {
	what string
	// rule of role, or binding (to a role not in deploy/).
	role    *rbacv1.ClusterRole // a Role is carried as a ClusterRole with a namespace
	kind    string              // ClusterRole or Role
	rule    int
	binding map[string]any
}

// serverGrants reads deploy/ (rendered by kustomize) and returns what it
// grants the server's ServiceAccount.
func (e *env) serverGrants(t *testing.T) []grant { return e.serverGrantsOf(t, "deploy") }

// serverGrantsOf is serverGrants of the kustomization in dir (relative to
// the repository).
func (e *env) serverGrantsOf(t *testing.T, dir string) []grant {
	out, err := exec.Command(e.kubectlPath, "kustomize", filepath.Join(testenv.RepoRoot(), dir)).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize %s/: %v", dir, err)
	}
	roles := map[string]*rbacv1.ClusterRole{} // kind/namespace/name
	var bindings []map[string]any
	for _, doc := range strings.Split(string(out), "\n---\n") {
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct{ Name, Namespace string }
			RoleRef  rbacv1.RoleRef   `json:"roleRef"`
			Subjects []rbacv1.Subject `json:"subjects"`
		}
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatal(err)
		}
		switch meta.Kind {
		case "ClusterRole", "Role":
			role := &rbacv1.ClusterRole{}
			if err := yaml.Unmarshal([]byte(doc), role); err != nil {
				t.Fatal(err)
			}
			roles[meta.Kind+"/"+meta.Metadata.Namespace+"/"+meta.Metadata.Name] = role
		case "ClusterRoleBinding", "RoleBinding":
			forServer := slices.ContainsFunc(meta.Subjects, func(s rbacv1.Subject) bool {
				return s.Kind == "ServiceAccount" && "system:serviceaccount:"+s.Namespace+":"+s.Name == serverUser
			})
			if !forServer {
				continue
			}
			var binding map[string]any
			if err := yaml.Unmarshal([]byte(doc), &binding); err != nil {
				t.Fatal(err)
			}
			bindings = append(bindings, binding)
		}
	}
	var grants []grant
	for _, binding := range bindings {
		meta := binding["metadata"].(map[string]any)
		ref := binding["roleRef"].(map[string]any)
		ns, _ := meta["namespace"].(string)
		key := ref["kind"].(string) + "/" + ns + "/" + ref["name"].(string)
		if ref["kind"] == "ClusterRole" {
			key = "ClusterRole//" + ref["name"].(string)
		}
		role, ok := roles[key]
		if !ok {
			grants = append(grants, grant{what: fmt.Sprintf("%s %s (to built-in %s %s)", binding["kind"], meta["name"], ref["kind"], ref["name"]), binding: binding})
			continue
		}
		for i, rule := range role.Rules {
			grants = append(grants, grant{what: fmt.Sprintf("%s %s rule %d %v", ref["kind"], role.Name, i, rule), role: role, kind: ref["kind"].(string), rule: i})
		}
	}
	return grants
}

// covers says whether a rule allows a use.
func covers(rule rbacv1.PolicyRule, u use) bool {
	resource := u.resource
	if u.subresource != "" {
		resource += "/" + u.subresource
	}
	return slices.Contains(rule.APIGroups, u.group) && slices.Contains(rule.Resources, resource) && slices.Contains(rule.Verbs, u.verb) &&
		(len(rule.ResourceNames) == 0 || slices.Contains(rule.ResourceNames, u.name))
}

// allowed asks the host whether the server's ServiceAccount may make the
// request.
func (e *env) allowed(t *testing.T, u use) bool {
	t.Helper()
	review := authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   serverUser,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:draplane-system", "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: u.verb, Group: u.group, Resource: u.resource, Subresource: u.subresource, Namespace: u.namespace, Name: u.name,
			},
		},
	}
	review.APIVersion, review.Kind = "authorization.k8s.io/v1", "SubjectAccessReview"
	body, _ := json.Marshal(review)
	out, err := e.kubectlStdin(string(body), "create", "-f", "-", "-o", "jsonpath={.status.allowed}")
	if err != nil {
		t.Fatalf("SubjectAccessReview %s: %v\n%s", u, err, out)
	}
	return out == "true"
}

// auditRecord is what the audit log says of one request.
type auditRecord struct {
	Verb       string `json:"verb"`
	Stage      string `json:"stage"`
	RequestURI string `json:"requestURI"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource, Namespace, Name, Subresource string
		APIGroup                               string `json:"apiGroup"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// testRBAC: the server did everything above with exactly deploy/'s RBAC.
// Every request it made is one of uses and none was refused (audit log);
// every verb deploy/ grants it is one of uses; and each rule, or binding
// to a built-in role, once taken away, denies some of them.
func (e *env) testRBAC(t *testing.T) {
	// A bearer token sent to the server directly is checked with a
	// TokenReview: authenticated (not 401), whatever it may then do.
	req, _ := http.NewRequest(http.MethodGet, e.draURL("/apis/"+group+"/v1"), nil)
	req.Header.Set("Authorization", "Bearer "+e.serverToken)
	resp, err := e.draClient(nil).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized {
		t.Errorf("bearer token sent to the server: 401, the TokenReview failed")
	}

	grants := e.serverGrants(t)

	t.Run("every granted verb is used", func(t *testing.T) {
		for _, g := range grants {
			if g.role == nil {
				continue
			}
			rule := g.role.Rules[g.rule]
			for _, groupName := range rule.APIGroups {
				for _, resource := range rule.Resources {
					r, sub, _ := strings.Cut(resource, "/")
					for _, verb := range rule.Verbs {
						names := rule.ResourceNames
						if len(names) == 0 {
							names = []string{""}
						}
						for _, name := range names {
							if !slices.ContainsFunc(uses, func(u use) bool {
								return u.verb == verb && u.group == groupName && u.resource == r && u.subresource == sub && (name == "" || u.name == name)
							}) {
								t.Errorf("%s grants %s %s %s (name %q) which the server never uses: remove it", g.what, verb, resource, groupName, name)
							}
						}
					}
				}
			}
		}
	})

	t.Run("the server's requests", func(t *testing.T) {
		seen := e.serverRequests(t, uses)
		reportUses(t, uses, seen)
	})

	// Each grant is needed: without it, some request it serves is
	// denied. Put back after each.
	allowedBefore := map[string]bool{}
	for _, u := range uses {
		allowedBefore[u.String()+u.name] = e.allowed(t, u)
		if !allowedBefore[u.String()+u.name] {
			t.Errorf("deploy/ does not allow %s (%s)", u, u.why)
		}
	}
	for _, g := range grants {
		t.Run("without "+g.what, func(t *testing.T) {
			// What it serves: the uses its rule covers; for a binding to
			// a built-in role, the uses no rule of deploy/ covers.
			var served []use
			for _, u := range uses {
				inDeploy := slices.ContainsFunc(grants, func(o grant) bool { return o.role != nil && covers(o.role.Rules[o.rule], u) })
				if (g.role != nil && covers(g.role.Rules[g.rule], u)) || (g.role == nil && !inDeploy) {
					served = append(served, u)
				}
			}
			e.takeAway(t, g)
			var denied []string
			err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
				denied = nil
				for _, u := range served {
					if !e.allowed(t, u) {
						denied = append(denied, u.String())
					}
				}
				return len(denied) > 0, nil
			})
			if err != nil {
				t.Errorf("taking away %s denies none of %v: remove it from deploy/", g.what, served)
			} else {
				t.Logf("denied without it: %s", strings.Join(denied, ", "))
			}
		})
	}
	// All back: everything allowed again.
	for _, u := range uses {
		poll(t, "allowed again: "+u.String(), func() (bool, error) { return e.allowed(t, u), nil })
	}
}

// takeAway removes a grant from the host cluster until the test ends.
func (e *env) takeAway(t *testing.T, g grant) {
	t.Helper()
	apply := func(object any) {
		body, err := json.Marshal(object)
		if err != nil {
			t.Fatal(err)
		}
		if out, err := e.kubectlStdin(string(body), "apply", "--server-side", "--force-conflicts", "--field-manager="+e2eFieldManager, "-f", "-"); err != nil {
			t.Fatalf("apply %s: %v\n%s", body, err, out)
		}
	}
	if g.role == nil {
		meta := g.binding["metadata"].(map[string]any)
		args := []string{"delete", strings.ToLower(g.binding["kind"].(string)), meta["name"].(string)}
		if ns, ok := meta["namespace"].(string); ok {
			args = append(args, "-n", ns)
		}
		if out, err := e.kubectl(args...); err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
		t.Cleanup(func() { apply(g.binding) })
		return
	}
	role := func(rules []rbacv1.PolicyRule) map[string]any {
		meta := map[string]any{"name": g.role.Name}
		if g.role.Namespace != "" {
			meta["namespace"] = g.role.Namespace
		}
		return map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": g.kind, "metadata": meta, "rules": rules}
	}
	apply(role(slices.Delete(slices.Clone(g.role.Rules), g.rule, g.rule+1)))
	t.Cleanup(func() { apply(role(g.role.Rules)) })
}

// serverRequests reads the audit log: the server's requests, counted by
// use. A refused one, or one in none of the tables, is an error.
func (e *env) serverRequests(t *testing.T, tables ...[]use) map[string]int {
	t.Helper()
	f, err := os.Open(e.auditLog)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	all := slices.Concat(tables...)
	seen := map[string]int{}
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 1<<24)
	for scanner.Scan() {
		var r auditRecord
		if err := json.Unmarshal(scanner.Bytes(), &r); err != nil {
			t.Fatalf("audit log: %v", err)
		}
		if r.User.Username != serverUser || (r.Stage != "ResponseComplete" && r.Stage != "ResponseStarted") {
			continue
		}
		if r.ObjectRef == nil {
			t.Logf("non-resource request %s %s", r.Verb, r.RequestURI)
			continue
		}
		u := use{verb: r.Verb, group: r.ObjectRef.APIGroup, resource: r.ObjectRef.Resource, subresource: r.ObjectRef.Subresource}
		if r.ResponseStatus != nil && r.ResponseStatus.Code == http.StatusForbidden {
			t.Errorf("the server was refused %s %s/%s: deploy/ lacks a permission", u, r.ObjectRef.Namespace, r.ObjectRef.Name)
		}
		if !slices.ContainsFunc(all, func(v use) bool { return v.String() == u.String() }) {
			t.Errorf("the server made a request not in the table of uses: %s (%s)", u, r.RequestURI)
		}
		seen[u.String()]++
	}
	if err := scanner.Err(); err != nil {
		t.Fatal(err)
	}
	return seen
}

// reportUses fails for each use of the table the server never made,
// unless it says why this test does not reach it.
func reportUses(t *testing.T, table []use, seen map[string]int) {
	t.Helper()
	for _, u := range table {
		switch {
		case seen[u.String()] == 0 && u.notReached == "":
			t.Errorf("the server never made %s (%s) in this test", u, u.why)
		case seen[u.String()] == 0:
			t.Logf("%s: not reached here (%s)", u, u.notReached)
		default:
			t.Logf("%s: %d requests (%s)", u, seen[u.String()], u.why)
		}
	}
}

// auditArgs writes an audit policy that records every request of the
// server's ServiceAccount and returns the kube-apiserver's flags for it.
func (e *env) auditArgs(t *testing.T) []string {
	t.Helper()
	e.auditLog = filepath.Join(e.dir, "audit.log")
	auditPolicy := filepath.Join(e.dir, "audit-policy.yaml")
	writeFile(t, auditPolicy, []byte(`apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  users: ["`+serverUser+`"]
- level: None
`))
	return []string{"--audit-policy-file=" + auditPolicy, "--audit-log-path=" + e.auditLog, "--audit-log-mode=blocking"}
}
