package resource

// AdminAccessNamespaceLabel must be "true" on a namespace for claims and
// templates in it to ask for admin access to devices (as upstream's
// DRAAdminAccess): admin access reaches devices that other claims use,
// so only namespaces an administrator marked may have it.
const AdminAccessNamespaceLabel = "resource.kubernetes.io/admin-access"

// AdminAccessRequest returns the index of the first request of the spec
// that asks for admin access, or -1. Only exact requests can: a
// firstAvailable alternative has no such field.
func AdminAccessRequest(spec *ResourceClaimSpec) int {
	for i := range spec.Devices.Requests {
		if exactly := spec.Devices.Requests[i].Exactly; exactly != nil && exactly.AdminAccess != nil && *exactly.AdminAccess {
			return i
		}
	}
	return -1
}

// AdminAccessResult returns the index of the first allocated device that
// was granted admin access, or -1.
func AdminAccessResult(allocation *AllocationResult) int {
	if allocation == nil {
		return -1
	}
	for i := range allocation.Devices.Results {
		if admin := allocation.Devices.Results[i].AdminAccess; admin != nil && *admin {
			return i
		}
	}
	return -1
}
