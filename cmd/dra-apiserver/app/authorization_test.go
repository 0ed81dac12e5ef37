package app

import (
	"context"
	"testing"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapiserver "k8s.io/apiserver/pkg/server"

	"github.com/draplane/draplane/internal/server/pki"
)

// TestStandaloneAuthorization: without an authorization kubeconfig the
// authorizer decides as the delegating options' one would: admin group and
// health paths allowed, everybody else denied.
func TestStandaloneAuthorization(t *testing.T) {
	o := NewOptions()
	var info genericapiserver.AuthorizationInfo
	if err := o.applyAuthorization(&info, nil); err != nil {
		t.Fatal(err)
	}
	var delegating genericapiserver.AuthorizationInfo
	if err := o.Authorization.ApplyTo(&delegating); err != nil {
		t.Fatal(err)
	}
	admin := &user.DefaultInfo{Name: "admin", Groups: []string{pki.AdminGroup}}
	other := &user.DefaultInfo{Name: "someone", Groups: []string{user.AllAuthenticated}}
	for _, tc := range []struct {
		name  string
		attrs authorizer.AttributesRecord
		want  authorizer.Decision
	}{
		{"admin lists claims", authorizer.AttributesRecord{User: admin, Verb: "list", APIGroup: "resource.draplane.dev", Resource: "resourceclaims", ResourceRequest: true}, authorizer.DecisionAllow},
		{"anyone reads /readyz", authorizer.AttributesRecord{User: other, Verb: "get", Path: "/readyz"}, authorizer.DecisionAllow},
		{"anyone else lists claims", authorizer.AttributesRecord{User: other, Verb: "list", APIGroup: "resource.draplane.dev", Resource: "resourceclaims", ResourceRequest: true}, authorizer.DecisionNoOpinion},
		{"anyone else reads /version", authorizer.AttributesRecord{User: other, Verb: "get", Path: "/version"}, authorizer.DecisionNoOpinion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _, err := info.Authorizer.Authorize(context.Background(), tc.attrs)
			if err != nil || got != tc.want {
				t.Errorf("decision %v (%v), want %v", got, err, tc.want)
			}
			upstream, _, _ := delegating.Authorizer.Authorize(context.Background(), tc.attrs)
			if upstream != got {
				t.Errorf("decision %v, the delegating options' authorizer says %v", got, upstream)
			}
		})
	}
}
