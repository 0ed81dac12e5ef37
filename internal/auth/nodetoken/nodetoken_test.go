package nodetoken

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

func TestAuthenticator(t *testing.T) {
	const key = "loopback-secret"
	valid := Token(key, "sim-node-3", "gpu.sim.example.com")
	parts := strings.Split(strings.TrimPrefix(valid, prefix), ".")
	for _, tc := range []struct {
		name, header string
		wantUser     string
		wantGroups   []string
		wantErr      bool
	}{
		{name: "valid", header: "Bearer " + valid, wantUser: "draplane:node:sim-node-3",
			wantGroups: []string{"draplane:nodes", "draplane:driver:gpu.sim.example.com", "system:authenticated"}},
		{name: "no header"},
		{name: "other token", header: "Bearer 0a1b2c3d-loopback", wantErr: true},
		{name: "minted with another key", header: "Bearer " + Token("other-key", "sim-node-3", "gpu.sim.example.com"), wantErr: true},
		{name: "another node, same MAC", header: "Bearer " + prefix + encoding.EncodeToString([]byte("sim-node-4")) + "." + parts[1] + "." + parts[2], wantErr: true},
		{name: "another driver, same MAC", header: "Bearer " + prefix + parts[0] + "." + encoding.EncodeToString([]byte("other.example.com")) + "." + parts[2], wantErr: true},
		// Without the node name's length in the MAC, these names would
		// have the valid token's MAC.
		{name: "names moved across the boundary", header: "Bearer " + prefix +
			encoding.EncodeToString([]byte("sim-node-3g")) + "." + encoding.EncodeToString([]byte("pu.sim.example.com")) + "." + parts[2], wantErr: true},
		{name: "no MAC", header: "Bearer " + prefix + parts[0] + "." + parts[1], wantErr: true},
		{name: "not base64", header: "Bearer " + prefix + "!!." + parts[1] + "." + parts[2], wantErr: true},
		{name: "empty node", header: "Bearer " + prefix + "." + parts[1] + "." + parts[2], wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, "https://example/api", nil)
			if tc.header != "" {
				req.Header.Set("Authorization", tc.header)
			}
			a := NewAuthenticator(key)
			// Twice: the second answer may come from what was accepted.
			for range 2 {
				resp, ok, err := a.AuthenticateRequest(req.Clone(req.Context()))
				if (err != nil) != tc.wantErr {
					t.Fatalf("error %v, want error: %v", err, tc.wantErr)
				}
				if ok != (tc.wantUser != "") {
					t.Fatalf("authenticated: %v, want %v", ok, tc.wantUser != "")
				}
				if !ok {
					continue
				}
				if resp.User.GetName() != tc.wantUser || !slices.Equal(resp.User.GetGroups(), tc.wantGroups) {
					t.Errorf("user %q in %q, want %q in %q", resp.User.GetName(), resp.User.GetGroups(), tc.wantUser, tc.wantGroups)
				}
			}
		})
	}
}

// TestNoKey: without a loopback token, no token is minted and none is
// accepted.
func TestNoKey(t *testing.T) {
	if token := Token("", "n", "d"); token != "" {
		t.Errorf("token %q minted without a key", token)
	}
	req, _ := http.NewRequest(http.MethodGet, "https://example/api", nil)
	req.Header.Set("Authorization", "Bearer "+prefix+encoding.EncodeToString([]byte("n"))+"."+encoding.EncodeToString([]byte("d"))+"."+
		encoding.EncodeToString(mac("", "n", "d")))
	if _, ok, _ := NewAuthenticator("").AuthenticateRequest(req); ok {
		t.Error("a token was accepted without a key")
	}
}
