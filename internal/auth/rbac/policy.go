package rbac

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-helpers/auth/rbac/reconciliation"
)

// Identities of node-bound drivers.
const (
	// NodesGroup is the group of every node-bound identity (a node agent
	// or a DRA driver on one node).
	NodesGroup = "draplane:nodes"
	// NodeUserPrefix + node name is the user name of a node-bound
	// identity.
	NodeUserPrefix = "draplane:node:"
	// DriverGroupPrefix + driver name is a group of a node-bound identity
	// that may publish ResourceSlices of that driver.
	DriverGroupPrefix = "draplane:driver:"
	// DriverRole is the ClusterRole of drivers, bound to NodesGroup.
	DriverRole = "draplane:driver"
)

// NodeGroups are the groups of a node-bound identity that publishes for
// drivers: NodesGroup and a driver group for each.
func NodeGroups(drivers ...string) []string {
	groups := make([]string, 0, 1+len(drivers))
	groups = append(groups, NodesGroup)
	for _, d := range drivers {
		groups = append(groups, DriverGroupPrefix+d)
	}
	return groups
}

// Labels that aggregate a ClusterRole into admin, edit and view.
const (
	AggregateToAdmin = "rbac.authorization.k8s.io/aggregate-to-admin"
	AggregateToEdit  = "rbac.authorization.k8s.io/aggregate-to-edit"
	AggregateToView  = "rbac.authorization.k8s.io/aggregate-to-view"
)

// Groups whose resources the default roles name.
const (
	draplaneGroup = "resource.draplane.dev"
	upstreamGroup = "resource.k8s.io"
)

var (
	read      = []string{"get", "list", "watch"}
	write     = []string{"create", "update", "patch", "delete", "deletecollection"}
	readWrite = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
)

func rule(verbs []string, groups []string, resources ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: verbs, APIGroups: groups, Resources: resources}
}

func groups(g ...string) []string { return g }

func verbs(v ...string) []string { return v }

// DefaultClusterRoles are the ClusterRoles every standalone server keeps:
// upstream's cluster-admin, system:discovery, system:basic-user,
// system:public-info-viewer, the aggregated admin, edit and view with the
// roles they aggregate (for the resources this server serves), a role
// that lets viewers see resourcepools, and the drivers' role.
func DefaultClusterRoles() []rbacv1.ClusterRole {
	aggregated := func(name string, label string, labels map[string]string) rbacv1.ClusterRole {
		return rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{
				{MatchLabels: map[string]string{label: "true"}},
			}},
		}
	}
	resourceGroups := groups(draplaneGroup, upstreamGroup)
	return []rbacv1.ClusterRole{
		{
			ObjectMeta: metav1.ObjectMeta{Name: "cluster-admin"},
			Rules: []rbacv1.PolicyRule{
				rule(verbs("*"), groups("*"), "*"),
				{Verbs: verbs("*"), NonResourceURLs: []string{"*"}},
			},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "system:discovery"},
			Rules: []rbacv1.PolicyRule{{Verbs: verbs("get"), NonResourceURLs: []string{
				"/livez", "/readyz", "/healthz", "/version", "/version/",
				"/openapi", "/openapi/*", "/api", "/api/*", "/apis", "/apis/*",
			}}},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "system:basic-user"},
			Rules: []rbacv1.PolicyRule{
				rule(verbs("create"), groups("authorization.k8s.io"), "selfsubjectaccessreviews", "selfsubjectrulesreviews"),
				rule(verbs("create"), groups("authentication.k8s.io"), "selfsubjectreviews"),
			},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "system:public-info-viewer"},
			Rules: []rbacv1.PolicyRule{{Verbs: verbs("get"), NonResourceURLs: []string{
				"/livez", "/readyz", "/healthz", "/version", "/version/",
			}}},
		},
		aggregated("admin", AggregateToAdmin, nil),
		aggregated("edit", AggregateToEdit, map[string]string{AggregateToAdmin: "true"}),
		aggregated("view", AggregateToView, map[string]string{AggregateToEdit: "true"}),
		{
			ObjectMeta: metav1.ObjectMeta{Name: "system:aggregate-to-admin", Labels: map[string]string{AggregateToAdmin: "true"}},
			Rules: []rbacv1.PolicyRule{
				rule(readWrite, groups(rbacv1.GroupName), "roles", "rolebindings"),
			},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "system:aggregate-to-edit", Labels: map[string]string{AggregateToEdit: "true"}},
			Rules: []rbacv1.PolicyRule{
				rule(write, groups(""), "pods"),
				rule(verbs("create"), groups(""), "pods/eviction"),
				rule(write, groups(""), "events"),
				rule(readWrite, groups("coordination.k8s.io"), "leases"),
				rule(write, resourceGroups, "resourceclaims", "resourceclaimtemplates"),
			},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "system:aggregate-to-view", Labels: map[string]string{AggregateToView: "true"}},
			Rules: []rbacv1.PolicyRule{
				rule(read, groups(""), "pods", "pods/status", "events", "namespaces", "namespaces/status"),
				rule(read, resourceGroups, "resourceclaims", "resourceclaims/status", "resourceclaimtemplates"),
			},
		},
		{
			// ResourcePools summarize the devices of the cluster's
			// ResourceSlices; viewers see them, not the slices.
			ObjectMeta: metav1.ObjectMeta{Name: "draplane:aggregate-to-view-resourcepools", Labels: map[string]string{AggregateToView: "true"}},
			Rules: []rbacv1.PolicyRule{
				rule(read, groups(draplaneGroup), "resourcepools"),
			},
		},
		{
			// What a DRA driver or node agent does. Bound to NodesGroup,
			// whose members the node authorizer and admission restrict
			// to their own node's objects and their own drivers.
			ObjectMeta: metav1.ObjectMeta{Name: DriverRole},
			Rules: []rbacv1.PolicyRule{
				rule(readWrite, resourceGroups, "resourceslices"),
				rule(read, resourceGroups, "deviceclasses"),
				rule(verbs("get"), resourceGroups, "resourceclaims"),
				rule(verbs("get", "update", "patch"), resourceGroups, "resourceclaims/status"),
				rule(verbs("get", "list", "watch", "create", "update", "patch"), groups(""), "nodes", "nodes/status"),
				rule(read, groups(""), "pods"),
				rule(verbs("get", "update", "patch"), groups(""), "pods/status"),
				rule(verbs("create", "update", "patch"), groups(""), "events"),
			},
		},
	}
}

// DefaultClusterRoleBindings bind the default roles: cluster-admin to the
// admin group, discovery and self reviews to every authenticated user, the
// drivers' role to NodesGroup.
func DefaultClusterRoleBindings() []rbacv1.ClusterRoleBinding {
	bind := func(name, role string, subjects ...rbacv1.Subject) rbacv1.ClusterRoleBinding {
		return rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   subjects,
		}
	}
	group := func(name string) rbacv1.Subject {
		return rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: name}
	}
	return []rbacv1.ClusterRoleBinding{
		bind("cluster-admin", "cluster-admin", group(user.SystemPrivilegedGroup)),
		bind("system:discovery", "system:discovery", group(user.AllAuthenticated)),
		bind("system:basic-user", "system:basic-user", group(user.AllAuthenticated)),
		bind("system:public-info-viewer", "system:public-info-viewer", group(user.AllAuthenticated)),
		bind(DriverRole, DriverRole, group(NodesGroup)),
	}
}

// defaultsAnnotation marks the default roles and bindings, as upstream's
// rbac.authorization.kubernetes.io/autoupdate: set to "false", the server
// leaves the object as the user changed it.
const defaultsAnnotation = rbacv1.AutoUpdateAnnotationKey

// ReconcileDefaults creates the default roles and bindings that are
// missing and adds the rules and subjects they lack to those that exist;
// it never removes what a user added.
func ReconcileDefaults(ctx context.Context, client kubernetes.Interface) error {
	for _, role := range DefaultClusterRoles() {
		role.Annotations = map[string]string{defaultsAnnotation: "true"}
		options := reconciliation.ReconcileRoleOptions{
			Role:    reconciliation.ClusterRoleRuleOwner{ClusterRole: &role},
			Client:  reconciliation.ClusterRoleModifier{Client: client.RbacV1().ClusterRoles()},
			Confirm: true,
		}
		if _, err := options.Run(); err != nil {
			return fmt.Errorf("reconcile ClusterRole %s: %w", role.Name, err)
		}
	}
	for _, binding := range DefaultClusterRoleBindings() {
		binding.Annotations = map[string]string{defaultsAnnotation: "true"}
		options := reconciliation.ReconcileRoleBindingOptions{
			RoleBinding: reconciliation.ClusterRoleBindingAdapter{ClusterRoleBinding: &binding},
			Client:      reconciliation.ClusterRoleBindingClientAdapter{Client: client.RbacV1().ClusterRoleBindings()},
			Confirm:     true,
		}
		if _, err := options.Run(); err != nil {
			return fmt.Errorf("reconcile ClusterRoleBinding %s: %w", binding.Name, err)
		}
	}
	return nil
}
