// Package lease serves coordination.k8s.io/v1 Leases, which leader election
// and node heartbeats use.
package lease

import (
	"context"

	coordinationv1 "k8s.io/api/coordination/v1"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/storage/names"

	"github.com/draplane/draplane/internal/registry/core/internal/corescheme"
)

type leaseStrategy struct {
	runtime.ObjectTyper
	names.NameGenerator
}

// Strategy is the create, update and delete strategy for leases.
var Strategy = leaseStrategy{corescheme.Scheme, names.SimpleNameGenerator}

func (leaseStrategy) NamespaceScoped() bool { return true }

func (leaseStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {}

func (leaseStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {}

func (leaseStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	lease := obj.(*coordinationv1.Lease)
	allErrs := apimachineryvalidation.ValidateObjectMeta(&lease.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	return append(allErrs, validateLeaseSpec(&lease.Spec, field.NewPath("spec"))...)
}

func (leaseStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	lease, oldLease := obj.(*coordinationv1.Lease), old.(*coordinationv1.Lease)
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&lease.ObjectMeta, &oldLease.ObjectMeta, field.NewPath("metadata"))
	return append(allErrs, validateLeaseSpec(&lease.Spec, field.NewPath("spec"))...)
}

func validateLeaseSpec(spec *coordinationv1.LeaseSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if spec.LeaseDurationSeconds != nil && *spec.LeaseDurationSeconds <= 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("leaseDurationSeconds"), *spec.LeaseDurationSeconds, "must be greater than 0"))
	}
	if spec.LeaseTransitions != nil && *spec.LeaseTransitions < 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("leaseTransitions"), *spec.LeaseTransitions, "must be greater than or equal to 0"))
	}
	if spec.Strategy != nil && *spec.Strategy != coordinationv1.OldestEmulationVersion {
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("strategy"), *spec.Strategy, []string{string(coordinationv1.OldestEmulationVersion)}))
	}
	if spec.PreferredHolder != nil && *spec.PreferredHolder != "" && spec.Strategy == nil {
		allErrs = append(allErrs, field.Forbidden(fldPath.Child("preferredHolder"), "may only be specified together with strategy"))
	}
	return allErrs
}

func (leaseStrategy) WarningsOnCreate(ctx context.Context, obj runtime.Object) []string { return nil }

func (leaseStrategy) WarningsOnUpdate(ctx context.Context, obj, old runtime.Object) []string {
	return nil
}

func (leaseStrategy) Canonicalize(obj runtime.Object) {}

func (leaseStrategy) AllowCreateOnUpdate(ctx context.Context) bool { return true }

func (leaseStrategy) AllowUnconditionalUpdate(ctx context.Context) bool { return false }
