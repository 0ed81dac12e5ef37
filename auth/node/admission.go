package node

import (
	"context"
	"fmt"
	"slices"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/utils/ptr"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

// PluginName names the admission plugin.
const PluginName = "draplane.dev/NodeRestriction"

// Admission refuses a node-bound identity's writes of other nodes'
// objects: ResourceSlices whose spec.nodeName is not its node or whose
// driver it holds no draplane:driver:<driver> group for, Nodes of another
// name, and claim status changes outside status.devices.
//
// In aggregated mode a driver's pods authenticate with bound service
// account tokens: the service accounts in DriverServiceAccounts are
// node-bound too, to the node their token names in the extra
// authentication.kubernetes.io/node-name (as upstream's NodeRestriction
// reads it, and the ValidatingAdmissionPolicy upstream's DRA drivers
// deploy), and may publish the drivers listed for them. A token without
// a node name may write nothing that the plugin checks.
type Admission struct {
	*admission.Handler
	// DriverServiceAccounts: service account user name
	// (system:serviceaccount:<namespace>:<name>) to the drivers it may
	// publish.
	DriverServiceAccounts map[string][]string
}

// NewAdmission returns the plugin.
func NewAdmission() *Admission {
	return &Admission{Handler: admission.NewHandler(admission.Create, admission.Update, admission.Delete)}
}

// NodeNameExtra is the user info extra of a bound service account token
// that names the node of the pod it is bound to.
const NodeNameExtra = "authentication.kubernetes.io/node-name"

// identify returns the node of a node-bound identity (a node's
// certificate, or a driver's service account token) and the drivers it
// may publish.
func (p *Admission) identify(u user.Info) (node string, drivers func(string) bool, ok bool) {
	if node, ok := Identify(u); ok {
		return node, func(d string) bool { return allowedDriver(u, d) }, true
	}
	if u == nil {
		return "", nil, false
	}
	allowed, ok := p.DriverServiceAccounts[u.GetName()]
	if !ok {
		return "", nil, false
	}
	if names := u.GetExtra()[NodeNameExtra]; len(names) > 0 {
		node = names[0]
	}
	return node, func(d string) bool { return slices.Contains(allowed, d) }, true
}

var _ admission.ValidationInterface = (*Admission)(nil)

// Validate implements admission.ValidationInterface.
func (p *Admission) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	u := a.GetUserInfo()
	node, driverAllowed, ok := p.identify(u)
	if !ok {
		return nil
	}
	forbidden := func(format string, args ...any) error {
		return admission.NewForbidden(a, fmt.Errorf("node restriction: "+format, args...))
	}
	gr := a.GetResource().GroupResource()
	checked := slices.Contains(resourceGroups, gr.Group) && (gr.Resource == "resourceslices" || gr.Resource == "resourceclaims" && a.GetSubresource() == "status") ||
		gr.Group == "" && gr.Resource == "nodes"
	if node == "" && checked {
		return forbidden("%s is a driver's service account, but its token names no node (%s): it must run in a pod on a node, with a bound service account token", u.GetName(), NodeNameExtra)
	}
	switch {
	case slices.Contains(resourceGroups, gr.Group) && gr.Resource == "resourceslices" && a.GetSubresource() == "":
		for _, obj := range []runtime.Object{a.GetObject(), a.GetOldObject()} {
			slice, ok := obj.(*resourceapi.ResourceSlice)
			if !ok {
				continue
			}
			if got := ptr.Deref(slice.Spec.NodeName, ""); got != node {
				return forbidden("%s may only write ResourceSlices with spec.nodeName %s; slice %s has %q", u.GetName(), node, slice.Name, got)
			}
			if !driverAllowed(slice.Spec.Driver) {
				if _, cert := Identify(u); !cert {
					return forbidden("%s may not publish ResourceSlices of driver %s: the driver is not listed for the service account", u.GetName(), slice.Spec.Driver)
				}
				return forbidden("%s may not publish ResourceSlices of driver %s: it lacks the group draplane:driver:%s", u.GetName(), slice.Spec.Driver, slice.Spec.Driver)
			}
		}
	case gr.Group == "" && gr.Resource == "nodes" && a.GetOperation() == admission.Create:
		if a.GetName() != node {
			return forbidden("%s may only register its own Node %s, not %s", u.GetName(), node, a.GetName())
		}
	case slices.Contains(resourceGroups, gr.Group) && gr.Resource == "resourceclaims" && a.GetSubresource() == "status" && a.GetOperation() == admission.Update:
		claim, ok := a.GetObject().(*resourceapi.ResourceClaim)
		old, okOld := a.GetOldObject().(*resourceapi.ResourceClaim)
		if !ok || !okOld {
			return apierrors.NewInternalError(fmt.Errorf("node restriction: unexpected claim types %T, %T", a.GetObject(), a.GetOldObject()))
		}
		status, oldStatus := claim.Status, old.Status
		status.Devices, oldStatus.Devices = nil, nil
		if !apiequality.Semantic.DeepEqual(status, oldStatus) {
			return forbidden("%s may only change status.devices of claim %s/%s", u.GetName(), claim.Namespace, claim.Name)
		}
	}
	return nil
}
