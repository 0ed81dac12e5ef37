// Package selfsubjectaccessreview serves authorization.k8s.io/v1
// SelfSubjectAccessReviews (kubectl auth can-i): the server's authorizer
// answers whether the requesting user may do what the review describes.
package selfsubjectaccessreview

import (
	"context"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
)

// REST creates SelfSubjectAccessReviews; nothing is stored.
type REST struct {
	authorizer authorizer.Authorizer
}

// NewREST answers reviews with authz, the server's authorizer.
func NewREST(authz authorizer.Authorizer) *REST { return &REST{authorizer: authz} }

var (
	_ rest.Creater              = (*REST)(nil)
	_ rest.Scoper               = (*REST)(nil)
	_ rest.SingularNameProvider = (*REST)(nil)
)

func (r *REST) New() runtime.Object     { return &authorizationv1.SelfSubjectAccessReview{} }
func (r *REST) Destroy()                {}
func (r *REST) NamespaceScoped() bool   { return false }
func (r *REST) GetSingularName() string { return "selfsubjectaccessreview" }

// Create implements rest.Creater.
func (r *REST) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	review, ok := obj.(*authorizationv1.SelfSubjectAccessReview)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a SelfSubjectAccessReview: %T", obj))
	}
	spec := review.Spec
	specPath := field.NewPath("spec")
	switch {
	case spec.ResourceAttributes == nil && spec.NonResourceAttributes == nil:
		return nil, apierrors.NewInvalid(authorizationv1.SchemeGroupVersion.WithKind("SelfSubjectAccessReview").GroupKind(), "",
			field.ErrorList{field.Required(specPath.Child("resourceAttributes"), "exactly one of nonResourceAttributes or resourceAttributes must be specified")})
	case spec.ResourceAttributes != nil && spec.NonResourceAttributes != nil:
		return nil, apierrors.NewInvalid(authorizationv1.SchemeGroupVersion.WithKind("SelfSubjectAccessReview").GroupKind(), "",
			field.ErrorList{field.Invalid(specPath.Child("nonResourceAttributes"), spec.NonResourceAttributes, "cannot be specified in combination with resourceAttributes")})
	}
	u, ok := genericapirequest.UserFrom(ctx)
	if !ok {
		return nil, apierrors.NewBadRequest("no user present on request")
	}
	if createValidation != nil {
		if err := createValidation(ctx, obj.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	decision, reason, err := r.authorizer.Authorize(ctx, Attributes(u, spec))
	review.Status = authorizationv1.SubjectAccessReviewStatus{
		Allowed: decision == authorizer.DecisionAllow,
		Denied:  decision == authorizer.DecisionDeny,
		Reason:  reason,
	}
	if err != nil {
		review.Status.EvaluationError = err.Error()
	}
	return review, nil
}

// Attributes are the authorizer attributes a review's spec describes for
// user u.
func Attributes(u user.Info, spec authorizationv1.SelfSubjectAccessReviewSpec) authorizer.AttributesRecord {
	if a := spec.NonResourceAttributes; a != nil {
		return authorizer.AttributesRecord{User: u, Verb: a.Verb, Path: a.Path}
	}
	a := spec.ResourceAttributes
	return authorizer.AttributesRecord{
		User: u, Verb: a.Verb, Namespace: a.Namespace, APIGroup: a.Group, APIVersion: matchAll(a.Version),
		Resource: a.Resource, Subresource: a.Subresource, Name: a.Name, ResourceRequest: true,
	}
}

func matchAll(version string) string {
	if version == "" {
		return "*"
	}
	return version
}
