// Package nodetokens checks the tokens of the simulated nodes' in-process
// clients (internal/auth/nodetoken) against the real server, with
// unmodified client-go clients over the network: a token minted from the
// server's loopback token is its node's identity, which the server
// authorizes and admits as that node; any other is refused.
package nodetokens

import (
	"context"
	"encoding/base64"
	"slices"
	"strings"
	"sync"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/generated/clientset/versioned"
	"github.com/draplane/draplane/internal/auth/nodetoken"
	"github.com/draplane/draplane/test/integration/framework"
)

const driver = "gpu.example.com"

func slice(node string) *resourcev1.ResourceSlice {
	return &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: node + "-gpu"},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   driver,
			NodeName: ptr.To(node),
			Pool:     resourcev1.ResourcePool{Name: node, ResourceSliceCount: 1},
			Devices:  []resourcev1.Device{{Name: "gpu-0"}},
		},
	}
}

func TestNodeTokens(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	config, admin := framework.StartServerWithConfig(ctx, t, &wg, false, "")
	key := config.Generic.LoopbackClientConfig.BearerToken
	if key == "" {
		t.Fatal("the server has no loopback token")
	}
	withToken := func(token string) *rest.Config {
		c := rest.AnonymousClientConfig(admin)
		c.BearerToken = token
		return c
	}

	t.Run("the token's node", func(t *testing.T) {
		c := withToken(nodetoken.Token(key, "node-a", driver))
		review, err := kubernetes.NewForConfigOrDie(c).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		u := review.Status.UserInfo
		want := []string{"draplane:nodes", "draplane:driver:" + driver, "system:authenticated"}
		if u.Username != "draplane:node:node-a" || !slices.Equal(u.Groups, want) {
			t.Errorf("user %q in %q, want draplane:node:node-a in %q", u.Username, u.Groups, want)
		}
		// Authorized and admitted as that node: its own slice, not
		// another node's.
		resources := versioned.NewForConfigOrDie(c).ResourceV1().ResourceSlices()
		if _, err := resources.Create(ctx, slice("node-a"), metav1.CreateOptions{}); err != nil {
			t.Errorf("create the node's own slice: %v", err)
		}
		if _, err := resources.Create(ctx, slice("node-b"), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("create another node's slice: %v, want forbidden", err)
		}
	})

	for _, tc := range []struct{ name, token string }{
		{name: "minted with another key", token: nodetoken.Token("not-the-loopback-token", "node-a", driver)},
		{name: "another node's name on a token", token: forge(nodetoken.Token(key, "node-a", driver), "node-b")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A bearer token no authenticator accepts leaves the request
			// anonymous, as the server does with any unknown token: it
			// may not even ask who it is.
			_, err := kubernetes.NewForConfigOrDie(withToken(tc.token)).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
			if !apierrors.IsUnauthorized(err) && !(apierrors.IsForbidden(err) && strings.Contains(err.Error(), `User "system:anonymous"`)) {
				t.Errorf("got %v, want unauthorized or forbidden to system:anonymous", err)
			}
		})
	}
}

// forge puts node's name in place of the one a token names, keeping its
// MAC.
func forge(token, node string) string {
	const prefix = "draplane-node."
	rest := token[len(prefix):]
	i := 0
	for rest[i] != '.' {
		i++
	}
	return prefix + base64URL(node) + rest[i:]
}

func base64URL(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
