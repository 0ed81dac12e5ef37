// Package selfsubjectreview serves authentication.k8s.io/v1
// SelfSubjectReviews (kubectl auth whoami): who the server took the
// requesting user to be.
package selfsubjectreview

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
)

// REST creates SelfSubjectReviews; nothing is stored.
type REST struct{}

// NewREST returns the storage of SelfSubjectReviews.
func NewREST() *REST { return &REST{} }

var (
	_ rest.Creater              = (*REST)(nil)
	_ rest.Scoper               = (*REST)(nil)
	_ rest.SingularNameProvider = (*REST)(nil)
)

func (r *REST) New() runtime.Object     { return &authenticationv1.SelfSubjectReview{} }
func (r *REST) Destroy()                {}
func (r *REST) NamespaceScoped() bool   { return false }
func (r *REST) GetSingularName() string { return "selfsubjectreview" }

// Create implements rest.Creater.
func (r *REST) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	review, ok := obj.(*authenticationv1.SelfSubjectReview)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a SelfSubjectReview: %T", obj))
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
	info := authenticationv1.UserInfo{Username: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups()}
	for key, values := range u.GetExtra() {
		if info.Extra == nil {
			info.Extra = map[string]authenticationv1.ExtraValue{}
		}
		info.Extra[key] = values
	}
	review.Status.UserInfo = info
	return review, nil
}
