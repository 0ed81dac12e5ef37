package node

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"

	"github.com/draplane/draplane/internal/registry/internal/statusrest"
	"github.com/draplane/draplane/internal/registry/internal/table"
	"github.com/draplane/draplane/internal/registry/patcherrors"
)

// REST serves nodes.
type REST struct {
	patcherrors.Store
}

// StatusREST serves the status subresource.
type StatusREST = statusrest.REST

// Storage holds the node resource and its subresources.
type Storage struct {
	Node   *REST
	Status *StatusREST
}

// NewStorage returns the storage of nodes and node status.
func NewStorage(optsGetter generic.RESTOptionsGetter) (*Storage, error) {
	store := &genericregistry.Store{
		NewFunc:                   func() runtime.Object { return &corev1.Node{} },
		NewListFunc:               func() runtime.Object { return &corev1.NodeList{} },
		DefaultQualifiedResource:  corev1.Resource("nodes"),
		SingularQualifiedResource: corev1.Resource("node"),
		PredicateFunc:             Matcher,
		CreateStrategy:            Strategy,
		UpdateStrategy:            Strategy,
		DeleteStrategy:            Strategy,
		ResetFieldsStrategy:       Strategy,
		TableConvertor:            tableConvertor,
	}
	if err := store.CompleteWithOptions(&generic.StoreOptions{RESTOptions: optsGetter, AttrFunc: GetAttrs}); err != nil {
		return nil, err
	}
	statusStore := *store
	statusStore.UpdateStrategy = StatusStrategy
	statusStore.ResetFieldsStrategy = StatusStrategy
	return &Storage{Node: &REST{Store: patcherrors.Store{Store: store}}, Status: statusrest.New(&statusStore)}, nil
}

// ShortNames implements rest.ShortNamesProvider.
func (r *REST) ShortNames() []string { return []string{"no"} }

var nodeDescriptions = corev1.NodeStatus{}.SwaggerDoc()

var tableConvertor = table.Convertor[*corev1.Node]{
	Columns: []metav1.TableColumnDefinition{
		table.NameColumn,
		{Name: "Status", Type: "string", Description: "The status of the node"},
		{Name: "Roles", Type: "string", Description: "The roles of the node"},
		table.AgeColumn,
		{Name: "Version", Type: "string", Description: corev1.NodeSystemInfo{}.SwaggerDoc()["kubeletVersion"]},
		{Name: "Internal-IP", Type: "string", Priority: 1, Description: nodeDescriptions["addresses"]},
		{Name: "OS-Image", Type: "string", Priority: 1, Description: corev1.NodeSystemInfo{}.SwaggerDoc()["osImage"]},
	},
	Row: func(node *corev1.Node) []interface{} {
		internalIP := "<none>"
		for _, address := range node.Status.Addresses {
			if address.Type == corev1.NodeInternalIP {
				internalIP = address.Address
				break
			}
		}
		osImage := node.Status.NodeInfo.OSImage
		if osImage == "" {
			osImage = "<unknown>"
		}
		return []interface{}{node.Name, nodeStatus(node), nodeRoles(node), table.Age(node.CreationTimestamp), node.Status.NodeInfo.KubeletVersion, internalIP, osImage}
	},
}

// nodeStatus is "Ready", "NotReady" or "Unknown", plus ",SchedulingDisabled"
// for a cordoned node, as kubectl shows it.
func nodeStatus(node *corev1.Node) string {
	status := "Unknown"
	for _, condition := range node.Status.Conditions {
		if condition.Type != corev1.NodeReady {
			continue
		}
		switch condition.Status {
		case corev1.ConditionTrue:
			status = "Ready"
		case corev1.ConditionFalse:
			status = "NotReady"
		}
	}
	if node.Spec.Unschedulable {
		status += ",SchedulingDisabled"
	}
	return status
}

const (
	roleLabelPrefix = "node-role.kubernetes.io/"
	roleLabel       = "kubernetes.io/role"
)

func nodeRoles(node *corev1.Node) string {
	var roles []string
	for key, value := range node.Labels {
		switch {
		case strings.HasPrefix(key, roleLabelPrefix) && len(key) > len(roleLabelPrefix):
			roles = append(roles, strings.TrimPrefix(key, roleLabelPrefix))
		case key == roleLabel && value != "":
			roles = append(roles, value)
		}
	}
	if len(roles) == 0 {
		return "<none>"
	}
	sort.Strings(roles)
	return strings.Join(roles, ",")
}
