// Package selfsubjectrulesreview serves authorization.k8s.io/v1
// SelfSubjectRulesReviews (kubectl auth can-i --list): the rules the
// requesting user holds in a namespace.
package selfsubjectrulesreview

import (
	"context"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
)

// REST creates SelfSubjectRulesReviews; nothing is stored.
type REST struct {
	resolver authorizer.RuleResolver
}

// NewREST answers reviews with the server's rule resolver.
func NewREST(resolver authorizer.RuleResolver) *REST { return &REST{resolver: resolver} }

var (
	_ rest.Creater              = (*REST)(nil)
	_ rest.Scoper               = (*REST)(nil)
	_ rest.SingularNameProvider = (*REST)(nil)
)

func (r *REST) New() runtime.Object     { return &authorizationv1.SelfSubjectRulesReview{} }
func (r *REST) Destroy()                {}
func (r *REST) NamespaceScoped() bool   { return false }
func (r *REST) GetSingularName() string { return "selfsubjectrulesreview" }

// Create implements rest.Creater.
func (r *REST) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	review, ok := obj.(*authorizationv1.SelfSubjectRulesReview)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a SelfSubjectRulesReview: %T", obj))
	}
	if review.Spec.Namespace == "" {
		return nil, apierrors.NewInvalid(authorizationv1.SchemeGroupVersion.WithKind("SelfSubjectRulesReview").GroupKind(), "",
			field.ErrorList{field.Required(field.NewPath("spec", "namespace"), "no namespace on request")})
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
	resourceInfo, nonResourceInfo, incomplete, err := r.resolver.RulesFor(ctx, u, review.Spec.Namespace)
	review.Status = authorizationv1.SubjectRulesReviewStatus{
		ResourceRules:    make([]authorizationv1.ResourceRule, 0, len(resourceInfo)),
		NonResourceRules: make([]authorizationv1.NonResourceRule, 0, len(nonResourceInfo)),
		Incomplete:       incomplete,
	}
	for _, info := range resourceInfo {
		review.Status.ResourceRules = append(review.Status.ResourceRules, authorizationv1.ResourceRule{
			Verbs: info.GetVerbs(), APIGroups: info.GetAPIGroups(), Resources: info.GetResources(), ResourceNames: info.GetResourceNames(),
		})
	}
	for _, info := range nonResourceInfo {
		review.Status.NonResourceRules = append(review.Status.NonResourceRules, authorizationv1.NonResourceRule{
			Verbs: info.GetVerbs(), NonResourceURLs: info.GetNonResourceURLs(),
		})
	}
	if err != nil {
		review.Status.EvaluationError = err.Error()
	}
	return review, nil
}
