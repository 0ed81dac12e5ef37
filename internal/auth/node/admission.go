package node

import (
	"context"
	"fmt"
	"slices"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/utils/ptr"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

// PluginName names the admission plugin.
const PluginName = "draplane.dev/NodeRestriction"

// Admission refuses a node-bound identity's writes of other nodes'
// objects: ResourceSlices whose spec.nodeName is not its node or whose
// driver it holds no draplane:driver:<driver> group for, Nodes of another
// name, claim status changes outside status.devices, and changes of the
// status.devices entries of drivers it does not hold.
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

// NewAdmission returns the plugin. The admission chain asks it about
// creates and deletes only; its checks of updates run in the stores of
// resourceslices and resourceclaims/status (UpdateCheck). Once a plugin of
// the chain handles updates, the API handlers decode every update's
// managedFields again after mutating admission (upstream's
// NewManagedFieldsValidatingAdmissionController), whoever sends it and
// whatever the resource: pod status updates paid for a check that never
// applies to pods.
func NewAdmission() *Admission {
	return &Admission{Handler: admission.NewHandler(admission.Create, admission.Delete)}
}

// UpdateCheck returns the plugin's check of updates of resource (with
// subresource), for the store that serves it to run where the API
// handlers run validating admission: as the updateValidation of the
// store's Update, after the strategy prepared the new object, so on
// updates, patches and applies, dry run or not. It builds the admission
// attributes of the update and calls Validate: the rules are the plugin's
// and a refusal is the same 403. The attributes name the group and version
// of the request (the stores serve resource.draplane.dev and
// resource.k8s.io), or resource's without one of those; they carry no
// kind and no options, which Validate does not read.
func (p *Admission) UpdateCheck(resource schema.GroupVersionResource, subresource string) rest.ValidateObjectUpdateFunc {
	return func(ctx context.Context, obj, old runtime.Object) error {
		u, ok := request.UserFrom(ctx)
		if !ok {
			return nil
		}
		if _, _, ok := p.identify(u); !ok {
			return nil
		}
		gvr := resource
		if info, ok := request.RequestInfoFrom(ctx); ok && info.IsResourceRequest && slices.Contains(resourceGroups, info.APIGroup) {
			gvr.Group, gvr.Version = info.APIGroup, info.APIVersion
		}
		accessor, err := meta.Accessor(obj)
		if err != nil {
			return apierrors.NewInternalError(fmt.Errorf("node restriction: %w", err))
		}
		attrs := admission.NewAttributesRecord(obj, old, schema.GroupVersionKind{}, accessor.GetNamespace(), accessor.GetName(), gvr, subresource, admission.Update, nil, false, u)
		return p.Validate(ctx, attrs, nil)
	}
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
				return forbidden("%s may not publish ResourceSlices of driver %s: %s", u.GetName(), slice.Spec.Driver, whyNotDriver(u, slice.Spec.Driver))
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
		for _, driver := range changedDeviceDrivers(old.Status.Devices, claim.Status.Devices) {
			if !driverAllowed(driver) {
				return forbidden("%s may not write the status of devices of driver %s: %s", u.GetName(), driver, whyNotDriver(u, driver))
			}
		}
	}
	return nil
}

// whyNotDriver says why an identity does not hold a driver: a node lacks
// the group, a driver's service account is not listed for it.
func whyNotDriver(u user.Info, driver string) string {
	if _, cert := Identify(u); !cert {
		return "the driver is not listed for the service account"
	}
	return "it lacks the group draplane:driver:" + driver
}

// changedDeviceDrivers returns the drivers of the status.devices entries
// that an update adds, changes or removes, in order of first mention.
// Entries are owned by their driver (the list is keyed by driver, pool,
// device and share), as upstream authorizes writes of them per driver:
// an identity may touch only the entries of drivers it holds.
func changedDeviceDrivers(old, updated []resourceapi.AllocatedDeviceStatus) []string {
	type key struct{ driver, pool, device, share string }
	keyOf := func(d *resourceapi.AllocatedDeviceStatus) key {
		return key{d.Driver, d.Pool, d.Device, ptr.Deref(d.ShareID, "")}
	}
	before := make(map[key]*resourceapi.AllocatedDeviceStatus, len(old))
	for i := range old {
		before[keyOf(&old[i])] = &old[i]
	}
	var drivers []string
	changed := func(driver string) {
		if !slices.Contains(drivers, driver) {
			drivers = append(drivers, driver)
		}
	}
	for i := range updated {
		entry := &updated[i]
		k := keyOf(entry)
		previous, ok := before[k]
		if !ok || !apiequality.Semantic.DeepEqual(previous, entry) {
			changed(entry.Driver)
		}
		delete(before, k)
	}
	for i := range old {
		if _, removed := before[keyOf(&old[i])]; removed {
			changed(old[i].Driver)
		}
	}
	return drivers
}
