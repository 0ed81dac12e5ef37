// Package nodetoken gives the simulated nodes' in-process clients bearer
// tokens of their own node identities, so that the server authenticates
// each of them as its node instead of authenticating the loopback client
// and then checking, on every request, that it may impersonate the node.
//
// A token names a node and a driver and carries an HMAC-SHA256 of both
// under the server's loopback token, a secret that lives only in the
// process and already grants more than any node identity. Only a holder
// of the loopback token can mint one, so the authenticator needs no table
// of tokens: it checks the MAC. The identity is the one a node agent's
// client certificate gives (pki.NodeKubeconfig): user
// draplane:node:<node>, groups draplane:nodes and draplane:driver:<driver>.
package nodetoken

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"sync"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/draplane/draplane/internal/auth/rbac"
)

// prefix starts every node token; tokens without it are not looked at.
const prefix = "draplane-node."

// encoding spells the token's parts: no padding, and none of its
// characters is the separator.
var encoding = base64.RawURLEncoding

// Token is the bearer token of node's identity with driver's group,
// minted with the loopback token key. It is empty when key is.
func Token(key, node, driver string) string {
	if key == "" {
		return ""
	}
	return prefix + encoding.EncodeToString([]byte(node)) + "." + encoding.EncodeToString([]byte(driver)) + "." +
		encoding.EncodeToString(mac(key, node, driver))
}

// mac is the tokens' HMAC of node and driver under key. The lengths
// separate the two names, so no other pair has the same message.
func mac(key, node, driver string) []byte {
	h := hmac.New(sha256.New, []byte(key))
	h.Write([]byte{byte(len(node) >> 8), byte(len(node))})
	h.Write([]byte(node))
	h.Write([]byte(driver))
	return h.Sum(nil)
}

// NewAuthenticator returns the authenticator of the tokens minted with
// key: a request whose bearer token is one is the token's node. Any other
// bearer token, and every one when key is empty, is not authenticated,
// with upstream's "invalid bearer token" error, as by every bearer token
// authenticator: the server's union of authenticators goes on to the
// next one. A request without a bearer token is neither.
//
// The tokens it accepted are remembered, with their users: only a holder
// of key can mint one, so there are as many as the process has simulated
// nodes, and the MAC is not computed again on each request.
func NewAuthenticator(key string) authenticator.Request {
	var accepted sync.Map // token -> *user.DefaultInfo
	return bearertoken.New(authenticator.TokenFunc(func(ctx context.Context, token string) (*authenticator.Response, bool, error) {
		if key == "" || !strings.HasPrefix(token, prefix) {
			return nil, false, nil
		}
		if u, ok := accepted.Load(token); ok {
			return &authenticator.Response{User: u.(*user.DefaultInfo)}, true, nil
		}
		node, driver, ok := parse(key, token)
		if !ok {
			return nil, false, nil
		}
		u := &user.DefaultInfo{
			Name:   rbac.NodeUserPrefix + node,
			Groups: append(rbac.NodeGroups(driver), user.AllAuthenticated),
		}
		accepted.Store(token, u)
		return &authenticator.Response{User: u}, true, nil
	}))
}

// parse returns the node and driver of a token minted with key.
func parse(key, token string) (node, driver string, ok bool) {
	parts := strings.Split(strings.TrimPrefix(token, prefix), ".")
	if len(parts) != 3 {
		return "", "", false
	}
	n, err1 := encoding.DecodeString(parts[0])
	d, err2 := encoding.DecodeString(parts[1])
	sum, err3 := encoding.DecodeString(parts[2])
	if err1 != nil || err2 != nil || err3 != nil || len(n) == 0 || len(n) > 0xffff || len(d) == 0 {
		return "", "", false
	}
	node, driver = string(n), string(d)
	if !hmac.Equal(sum, mac(key, node, driver)) {
		return "", "", false
	}
	return node, driver, true
}
