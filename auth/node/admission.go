package node

import (
	"context"
	"fmt"
	"slices"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/utils/ptr"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

// PluginName names the admission plugin.
const PluginName = "draplane.dev/NodeRestriction"

// Admission refuses a node-bound identity's writes of other nodes'
// objects: ResourceSlices whose spec.nodeName is not its node or whose
// driver it holds no draplane:driver:<driver> group for, Nodes of another
// name, and claim status changes outside status.devices.
type Admission struct {
	*admission.Handler
}

// NewAdmission returns the plugin.
func NewAdmission() *Admission {
	return &Admission{Handler: admission.NewHandler(admission.Create, admission.Update, admission.Delete)}
}

var _ admission.ValidationInterface = (*Admission)(nil)

// Validate implements admission.ValidationInterface.
func (p *Admission) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	u := a.GetUserInfo()
	node, ok := Identify(u)
	if !ok {
		return nil
	}
	forbidden := func(format string, args ...any) error {
		return admission.NewForbidden(a, fmt.Errorf("node restriction: "+format, args...))
	}
	gr := a.GetResource().GroupResource()
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
			if !allowedDriver(u, slice.Spec.Driver) {
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
