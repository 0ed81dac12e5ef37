package resourceclaim

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

// NamespaceGetter reads namespaces: core-lite's in standalone mode, the
// host cluster's in aggregated mode. It is read live for every request
// that asks for admin access (they are rare), so that a label removed a
// moment ago counts.
type NamespaceGetter interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Namespace, error)
}

// AdminAccess admits admin access to devices only in namespaces labelled
// resourceapi.AdminAccessNamespaceLabel=true, as upstream's DRAAdminAccess
// does: claims and templates that ask for it elsewhere are refused, and
// so is a status that newly grants it. Requests that do not ask for
// admin access cost nothing. Without namespaces to read, admin access is
// refused everywhere.
type AdminAccess struct {
	Namespaces NamespaceGetter
}

// ValidateSpec checks a new claim spec (of a claim or a template).
func (a AdminAccess) ValidateSpec(ctx context.Context, namespace string, spec *resourceapi.ResourceClaimSpec, specPath *field.Path) field.ErrorList {
	i := resourceapi.AdminAccessRequest(spec)
	if i < 0 {
		return nil
	}
	return a.check(ctx, namespace, specPath.Child("devices", "requests").Index(i).Child("exactly", "adminAccess"))
}

// ValidateSpecUpdate checks an update: only a spec that newly asks for
// admin access is checked, so that objects created while the namespace
// had the label keep working (finalizers, labels) after it is removed.
func (a AdminAccess) ValidateSpecUpdate(ctx context.Context, namespace string, spec, oldSpec *resourceapi.ResourceClaimSpec, specPath *field.Path) field.ErrorList {
	if resourceapi.AdminAccessRequest(oldSpec) >= 0 {
		return nil
	}
	return a.ValidateSpec(ctx, namespace, spec, specPath)
}

// ValidateStatusUpdate checks an allocation that newly grants admin
// access.
func (a AdminAccess) ValidateStatusUpdate(ctx context.Context, claim, old *resourceapi.ResourceClaim) field.ErrorList {
	if resourceapi.AdminAccessResult(old.Status.Allocation) >= 0 {
		// Granted before; an allocation never changes once set.
		return nil
	}
	i := resourceapi.AdminAccessResult(claim.Status.Allocation)
	if i < 0 {
		return nil
	}
	return a.check(ctx, claim.Namespace, field.NewPath("status", "allocation", "devices", "results").Index(i).Child("adminAccess"))
}

func (a AdminAccess) check(ctx context.Context, namespace string, fldPath *field.Path) field.ErrorList {
	requirement := fmt.Sprintf("admin access to devices requires the label %s=true on namespace %s", resourceapi.AdminAccessNamespaceLabel, namespace)
	if a.Namespaces == nil {
		return field.ErrorList{field.Forbidden(fldPath, requirement+", and this server has no namespaces to check")}
	}
	ns, err := a.Namespaces.Get(ctx, namespace, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return field.ErrorList{field.Forbidden(fldPath, requirement+", which does not exist")}
	case err != nil:
		// Not an internal error of ours: the caller may try again.
		return field.ErrorList{field.Forbidden(fldPath, fmt.Sprintf("%s, which cannot be read now: %v", requirement, err))}
	case ns.Labels[resourceapi.AdminAccessNamespaceLabel] != "true":
		return field.ErrorList{field.Forbidden(fldPath, requirement)}
	}
	return nil
}
