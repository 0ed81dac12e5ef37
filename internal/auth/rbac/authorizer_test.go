package rbac

import (
	"context"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	"k8s.io/client-go/tools/cache"
)

func indexer(objects ...any) cache.Indexer {
	i := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, o := range objects {
		_ = i.Add(o)
	}
	return i
}

func testResolver() *Resolver {
	clusterRoles := []any{}
	for i := range DefaultClusterRoles() {
		role := DefaultClusterRoles()[i]
		clusterRoles = append(clusterRoles, &role)
	}
	clusterRoles = append(clusterRoles, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "claims-reader"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{"resource.draplane.dev"}, Resources: []string{"resourceclaims", "*/status"}, ResourceNames: []string{"c1"}}}})
	bindings := []any{}
	for i := range DefaultClusterRoleBindings() {
		b := DefaultClusterRoleBindings()[i]
		bindings = append(bindings, &b)
	}
	return &Resolver{
		Roles: rbaclisters.NewRoleLister(indexer(&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "leases", Namespace: "ns1"},
			Rules: []rbacv1.PolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}}}})),
		RoleBindings: rbaclisters.NewRoleBindingLister(indexer(
			&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns1"}, RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "leases"},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "alice"}}},
			&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns1"}, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "claims-reader"},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, Name: "readers"}}},
			&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns1"}, RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "missing"},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "bob"}}},
			&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "ns1"}, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "claims-reader"},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "robot"}}},
		)),
		ClusterRoles:        rbaclisters.NewClusterRoleLister(indexer(clusterRoles...)),
		ClusterRoleBindings: rbaclisters.NewClusterRoleBindingLister(indexer(bindings...)),
	}
}

func TestAuthorize(t *testing.T) {
	authz := &Authorizer{Resolver: testResolver()}
	alice := &user.DefaultInfo{Name: "alice", Groups: []string{user.AllAuthenticated}}
	reader := &user.DefaultInfo{Name: "carol", Groups: []string{"readers", user.AllAuthenticated}}
	robot := &user.DefaultInfo{Name: "system:serviceaccount:ns1:robot"}
	node := &user.DefaultInfo{Name: NodeUserPrefix + "n1", Groups: []string{NodesGroup}}
	resource := func(u user.Info, verb, group, res, sub, ns, name string) authorizer.AttributesRecord {
		return authorizer.AttributesRecord{User: u, Verb: verb, APIGroup: group, Resource: res, Subresource: sub, Namespace: ns, Name: name, ResourceRequest: true}
	}
	for _, tc := range []struct {
		name  string
		attrs authorizer.AttributesRecord
		want  authorizer.Decision
	}{
		{"role in its namespace", resource(alice, "update", "coordination.k8s.io", "leases", "", "ns1", "l"), authorizer.DecisionAllow},
		{"role not in another namespace", resource(alice, "update", "coordination.k8s.io", "leases", "", "ns2", "l"), authorizer.DecisionNoOpinion},
		{"role not cluster-wide", resource(alice, "list", "coordination.k8s.io", "leases", "", "", ""), authorizer.DecisionNoOpinion},
		{"group binding, named resource", resource(reader, "get", "resource.draplane.dev", "resourceclaims", "", "ns1", "c1"), authorizer.DecisionAllow},
		{"named resource, other name", resource(reader, "get", "resource.draplane.dev", "resourceclaims", "", "ns1", "c2"), authorizer.DecisionNoOpinion},
		{"named resource never lists", resource(reader, "list", "resource.draplane.dev", "resourceclaims", "", "ns1", ""), authorizer.DecisionNoOpinion},
		{"*/status matches a subresource", resource(reader, "get", "resource.draplane.dev", "resourceclaims", "status", "ns1", "c1"), authorizer.DecisionAllow},
		{"other group", resource(reader, "get", "resource.k8s.io", "resourceclaims", "", "ns1", "c1"), authorizer.DecisionNoOpinion},
		{"service account subject in the binding's namespace", resource(robot, "get", "resource.draplane.dev", "resourceclaims", "", "ns1", "c1"), authorizer.DecisionAllow},
		{"basic user self review", resource(alice, "create", "authorization.k8s.io", "selfsubjectrulesreviews", "", "", ""), authorizer.DecisionAllow},
		{"discovery path", authorizer.AttributesRecord{User: alice, Verb: "get", Path: "/apis/resource.draplane.dev"}, authorizer.DecisionAllow},
		{"other path", authorizer.AttributesRecord{User: alice, Verb: "get", Path: "/metrics"}, authorizer.DecisionNoOpinion},
		{"driver role writes slices", resource(node, "create", "resource.k8s.io", "resourceslices", "", "", ""), authorizer.DecisionAllow},
		{"driver role reads no secrets", resource(node, "get", "", "secrets", "", "ns1", "s"), authorizer.DecisionNoOpinion},
		{"driver role cannot list claims", resource(node, "list", "resource.draplane.dev", "resourceclaims", "", "ns1", ""), authorizer.DecisionNoOpinion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, reason, err := authz.Authorize(context.Background(), tc.attrs)
			if err != nil || got != tc.want {
				t.Errorf("decision %v (reason %q, err %v), want %v", got, reason, err, tc.want)
			}
		})
	}
	// A binding to a missing role is reported, not fatal.
	bob := &user.DefaultInfo{Name: "bob"}
	if got, reason, _ := authz.Authorize(context.Background(), resource(bob, "get", "", "pods", "", "ns1", "p")); got != authorizer.DecisionNoOpinion || reason == "" {
		t.Errorf("binding to a missing role: %v %q, want no opinion with a reason", got, reason)
	}
}

func TestRulesFor(t *testing.T) {
	authz := &Authorizer{Resolver: testResolver()}
	alice := &user.DefaultInfo{Name: "alice", Groups: []string{user.AllAuthenticated}}
	resourceRules, nonResourceRules, _, err := authz.RulesFor(context.Background(), alice, "ns1")
	if err != nil {
		t.Fatal(err)
	}
	var leases, reviews bool
	for _, r := range resourceRules {
		for _, res := range r.GetResources() {
			leases = leases || res == "leases"
			reviews = reviews || res == "selfsubjectrulesreviews"
		}
	}
	if !leases || !reviews || len(nonResourceRules) == 0 {
		t.Errorf("rules of alice in ns1: leases %v, self reviews %v, %d non-resource rules", leases, reviews, len(nonResourceRules))
	}
}
