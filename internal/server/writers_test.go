package server

import (
	"testing"

	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/draplane/draplane/internal/auth/rbac"
)

func TestWriterOf(t *testing.T) {
	for name, tc := range map[string]struct {
		user user.Info
		want string
	}{
		"loopback":                    {&user.DefaultInfo{Name: user.APIServerUser, Groups: []string{user.SystemPrivilegedGroup}}, WriterControlPlane},
		"node":                        {&user.DefaultInfo{Name: rbac.NodeUserPrefix + "n1", Groups: []string{rbac.NodesGroup}}, WriterNode},
		"node name without the group": {&user.DefaultInfo{Name: rbac.NodeUserPrefix + "n1"}, WriterClient},
		"admin":                       {&user.DefaultInfo{Name: "admin", Groups: []string{user.SystemPrivilegedGroup}}, WriterClient},
		"anonymous":                   {nil, WriterClient},
	} {
		t.Run(name, func(t *testing.T) {
			if got := writerOf(tc.user); got != tc.want {
				t.Errorf("writer %q, want %q", got, tc.want)
			}
		})
	}
}
