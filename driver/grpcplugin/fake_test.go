package grpcplugin

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	drahealthv1 "k8s.io/kubelet/pkg/apis/dra-health/v1"
	drahealthv1alpha1 "k8s.io/kubelet/pkg/apis/dra-health/v1alpha1"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
	drapbv1beta1 "k8s.io/kubelet/pkg/apis/dra/v1beta1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// waitTimeout bounds every "wait until": generous, the machine is shared.
const waitTimeout = 30 * time.Second

// shortDir is a temp dir with a short path: Unix socket paths are limited
// to 108 bytes and t.TempDir() includes the test's name.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "gp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// eventually polls cond until it holds or waitTimeout passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, waitTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// fakePlugin is a kubelet plugin: a registration server on a socket in
// the registration directory and the DRA services (v1, v1beta1, health
// v1 and v1alpha1, as its versions say) on a socket of its own.
type fakePlugin struct {
	// Type, Name and Versions are what GetInfo answers.
	Type, Name string
	Versions   []string
	// RegSocket and DRASocket are the two socket paths.
	RegSocket, DRASocket string
	// Prepare answers NodePrepareResources (v1 terms; v1beta1 is
	// converted); nil prepares every claim with no devices.
	Prepare func(*drapbv1.NodePrepareResourcesRequest) *drapbv1.NodePrepareResourcesResponse
	// Unprepare answers NodeUnprepareResources; nil succeeds.
	Unprepare func(*drapbv1.NodeUnprepareResourcesRequest) *drapbv1.NodeUnprepareResourcesResponse
	// Health, if set, feeds the health streams: each stream sends what
	// it reads and ends when it reads nil.
	Health chan *drahealthv1.NodeWatchResourcesResponse

	mu sync.Mutex
	// statuses are the NotifyRegistrationStatus calls received.
	statuses []*registerapi.RegistrationStatus
	// calls counts the calls per method ("v1/NodePrepareResources", ...).
	calls map[string]int
	// requests are the prepare requests received.
	requests []*drapbv1.NodePrepareResourcesRequest
	// streams counts the health streams opened.
	streams int

	reg, dra *grpc.Server
}

func (f *fakePlugin) count(method string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[method]++
}

func (f *fakePlugin) Calls(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[method]
}

func (f *fakePlugin) Statuses() []*registerapi.RegistrationStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*registerapi.RegistrationStatus(nil), f.statuses...)
}

func (f *fakePlugin) Streams() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.streams
}

// Start serves the DRA socket first, then the registration socket (as
// kubeletplugin does). Stop undoes it; the test's end stops it too.
func (f *fakePlugin) Start(t *testing.T) {
	t.Helper()
	f.dra = grpc.NewServer()
	for _, v := range f.Versions {
		switch v {
		case drapbv1.DRAPluginService:
			drapbv1.RegisterDRAPluginServer(f.dra, &v1Server{f: f})
		case drapbv1beta1.DRAPluginService:
			// The v1 fake behind k8s.io/kubelet's conversion, as
			// kubeletplugin serves v1beta1.
			drapbv1beta1.RegisterDRAPluginServer(f.dra, drapbv1beta1.V1ServerWrapper{DRAPluginServer: &v1Server{f: f, prefix: "v1beta1"}})
		case drahealthv1.DRAResourceHealthService:
			drahealthv1.RegisterDRAResourceHealthServer(f.dra, &healthServer{f: f})
		case drahealthv1alpha1.DRAResourceHealthService:
			drahealthv1alpha1.RegisterDRAResourceHealthServer(f.dra, drahealthv1.V1ServerWrapper{Server: &healthServer{f: f}})
		}
	}
	serve(t, f.dra, f.DRASocket)
	f.reg = grpc.NewServer()
	registerapi.RegisterRegistrationServer(f.reg, &regServer{f: f})
	serve(t, f.reg, f.RegSocket)
	t.Cleanup(f.Stop)
}

// Stop ends both servers; their listeners remove the socket files.
func (f *fakePlugin) Stop() {
	if f.reg != nil {
		f.reg.Stop()
		f.reg = nil
	}
	if f.dra != nil {
		f.dra.Stop()
		f.dra = nil
	}
}

func serve(t *testing.T, server *grpc.Server, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	_ = os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = server.Serve(l) }()
}

type regServer struct {
	registerapi.UnimplementedRegistrationServer
	f *fakePlugin
}

func (s *regServer) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{Type: s.f.Type, Name: s.f.Name, Endpoint: s.f.DRASocket, SupportedVersions: s.f.Versions}, nil
}

func (s *regServer) NotifyRegistrationStatus(_ context.Context, status *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	s.f.statuses = append(s.f.statuses, status)
	return &registerapi.RegistrationStatusResponse{}, nil
}

type v1Server struct {
	drapbv1.UnimplementedDRAPluginServer
	f      *fakePlugin
	prefix string
}

func (s *v1Server) NodePrepareResources(_ context.Context, req *drapbv1.NodePrepareResourcesRequest) (*drapbv1.NodePrepareResourcesResponse, error) {
	prefix := s.prefix
	if prefix == "" {
		prefix = "v1"
	}
	s.f.count(prefix + "/NodePrepareResources")
	s.f.mu.Lock()
	s.f.requests = append(s.f.requests, req)
	s.f.mu.Unlock()
	if s.f.Prepare != nil {
		return s.f.Prepare(req), nil
	}
	resp := &drapbv1.NodePrepareResourcesResponse{Claims: map[string]*drapbv1.NodePrepareResourceResponse{}}
	for _, c := range req.Claims {
		resp.Claims[c.Uid] = &drapbv1.NodePrepareResourceResponse{}
	}
	return resp, nil
}

func (s *v1Server) NodeUnprepareResources(_ context.Context, req *drapbv1.NodeUnprepareResourcesRequest) (*drapbv1.NodeUnprepareResourcesResponse, error) {
	prefix := s.prefix
	if prefix == "" {
		prefix = "v1"
	}
	s.f.count(prefix + "/NodeUnprepareResources")
	if s.f.Unprepare != nil {
		return s.f.Unprepare(req), nil
	}
	resp := &drapbv1.NodeUnprepareResourcesResponse{Claims: map[string]*drapbv1.NodeUnprepareResourceResponse{}}
	for _, c := range req.Claims {
		resp.Claims[c.Uid] = &drapbv1.NodeUnprepareResourceResponse{}
	}
	return resp, nil
}

type healthServer struct {
	drahealthv1.UnimplementedDRAResourceHealthServer
	f *fakePlugin
}

func (s *healthServer) NodeWatchResources(_ *drahealthv1.NodeWatchResourcesRequest, stream drahealthv1.DRAResourceHealth_NodeWatchResourcesServer) error {
	s.f.mu.Lock()
	s.f.streams++
	s.f.mu.Unlock()
	if s.f.Health == nil {
		<-stream.Context().Done()
		return nil
	}
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case resp := <-s.f.Health:
			if resp == nil {
				return nil
			}
			if err := stream.Send(resp); err != nil {
				return err
			}
		}
	}
}
