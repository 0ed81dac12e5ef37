package grpcplugin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/klog/v2"
	drahealthv1 "k8s.io/kubelet/pkg/apis/dra-health/v1"
	drahealthv1alpha1 "k8s.io/kubelet/pkg/apis/dra-health/v1alpha1"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
	drapbv1beta1 "k8s.io/kubelet/pkg/apis/dra/v1beta1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// The kubelet's choices (pkg/kubelet/cm/dra/plugin,
// pkg/kubelet/pluginmanager/operationexecutor).
var (
	// servicesSupported are the DRA gRPC services a plugin may be called
	// through. The plugin's order decides (the first of its list that is
	// here), as in the kubelet.
	servicesSupported = []string{drapbv1.DRAPluginService, drapbv1beta1.DRAPluginService}
	// healthServicesSupported, newest first: the first the plugin lists
	// is taken.
	healthServicesSupported = []string{drahealthv1.DRAResourceHealthService, drahealthv1alpha1.DRAResourceHealthService}
)

const (
	// dialTimeout bounds reaching a registration socket and its GetInfo
	// answer (the kubelet: 10s to dial, 1s for GetInfo).
	dialTimeout = 10 * time.Second
	// notifyTimeout bounds NotifyRegistrationStatus (the kubelet's).
	notifyTimeout = 5 * time.Second
	// DefaultCallTimeout is the kubelet's timeout of a prepare or
	// unprepare call.
	DefaultCallTimeout = 45 * time.Second
	// DefaultResyncPeriod is how often the directory is read again in
	// case fsnotify lost an event.
	DefaultResyncPeriod = 10 * time.Second
	// DefaultHealthRetryPeriod is how long to wait before opening a health
	// stream again (the kubelet's).
	DefaultHealthRetryPeriod = 5 * time.Second

	initialBackoff = 500 * time.Millisecond
	maxBackoff     = 2 * time.Minute
)

// Options configure a Registry.
type Options struct {
	// Dir is the registration directory, the kubelet's
	// <root>/plugins_registry. It is created if it does not exist.
	Dir string
	// CallTimeout bounds each NodePrepareResources and
	// NodeUnprepareResources call; DefaultCallTimeout if zero.
	CallTimeout time.Duration
	// ResyncPeriod: DefaultResyncPeriod if zero.
	ResyncPeriod time.Duration
	// HealthRetryPeriod: DefaultHealthRetryPeriod if zero.
	HealthRetryPeriod time.Duration
	// OnChange, if set, is called after a plugin registered or before
	// its registration is dropped (not when Run returns). It is called
	// from the Registry's loop: it must not block and must not call Run.
	OnChange func(Event)
	// OnHealth, if set, receives each device health update a plugin
	// sends; without it no health stream is opened. It is called from
	// the plugin's stream goroutine, one update at a time per plugin.
	OnHealth func(HealthUpdate)
}

// Event is a plugin registered or deregistered.
type Event struct {
	Plugin
	Registered bool
}

// Plugin is one registered plugin.
type Plugin struct {
	DriverName string
	// SocketPath is its registration socket, Endpoint its DRA socket.
	SocketPath, Endpoint string
	// Service is the DRA gRPC service calls go to ("v1.DRAPlugin" or
	// "v1beta1.DRAPlugin"); HealthService the health service streamed,
	// empty if the plugin offers none.
	Service, HealthService string
}

// Registry is the kubelet's plugin registration for DRA plugins; see the
// package documentation. Create it with New, then Run it.
type Registry struct {
	opts Options

	mu sync.RWMutex
	// drivers holds the registered plugins of each driver in the order
	// they registered.
	drivers map[string][]*plugin
	// streams are the health streams' goroutines.
	streams sync.WaitGroup
}

// plugin is a registered plugin with its connection.
type plugin struct {
	Plugin
	file   os.FileInfo // the registration socket it registered from
	conn   *grpc.ClientConn
	cancel context.CancelFunc // ends its health stream
}

// New returns a Registry for opts.Dir; nothing happens before Run.
func New(opts Options) *Registry {
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	if opts.ResyncPeriod <= 0 {
		opts.ResyncPeriod = DefaultResyncPeriod
	}
	if opts.HealthRetryPeriod <= 0 {
		opts.HealthRetryPeriod = DefaultHealthRetryPeriod
	}
	return &Registry{opts: opts, drivers: map[string][]*plugin{}}
}

// Plugins lists the registered plugins, by driver name and then in the
// order they registered.
func (r *Registry) Plugins() []Plugin {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []Plugin
	for _, list := range r.drivers {
		for _, p := range list {
			out = append(out, p.Plugin)
		}
	}
	slices.SortStableFunc(out, func(a, b Plugin) int { return strings.Compare(a.DriverName, b.DriverName) })
	return out
}

// pick is the plugin calls of the driver go to: the newest one whose
// connection is not failing, else the newest (the kubelet's heuristic).
func (r *Registry) pick(driverName string) *plugin {
	r.mu.RLock()
	defer r.mu.RUnlock()
	list := r.drivers[driverName]
	for i := len(list) - 1; i >= 0; i-- {
		switch list[i].conn.GetState() {
		case connectivity.TransientFailure, connectivity.Shutdown:
		default:
			return list[i]
		}
	}
	if len(list) == 0 {
		return nil
	}
	return list[len(list)-1]
}

// socket is what Run knows of one registration socket.
type socket struct {
	registered *plugin
	// inFlight: a registration attempt runs.
	inFlight bool
	// failed is the file the last attempt failed for; the next attempt
	// for the same file waits until retryAt.
	failed   os.FileInfo
	failures int
	retryAt  time.Time
}

// attempt is the outcome of one registration.
type attempt struct {
	path   string
	file   os.FileInfo
	plugin *plugin
	err    error
}

// sameFile: the same socket file, not one created again at the path.
func sameFile(a, b os.FileInfo) bool {
	return a != nil && b != nil && os.SameFile(a, b) && a.ModTime().Equal(b.ModTime())
}

// Run watches the directory and registers plugins until ctx ends; then it
// closes every connection and returns. It returns an error only if the
// directory cannot be watched.
func (r *Registry) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithName("grpcplugin")
	ctx = klog.NewContext(ctx, logger)
	if r.opts.Dir == "" {
		return errors.New("grpcplugin: no registration directory")
	}
	if err := os.MkdirAll(r.opts.Dir, 0o755); err != nil {
		return fmt.Errorf("grpcplugin: registration directory: %w", err)
	}
	watcher, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("grpcplugin: watch %s: %w", r.opts.Dir, err)
	}
	defer func() { _ = watcher.Close() }()

	w := &dirWatch{
		r:       r,
		logger:  logger,
		watcher: watcher,
		results: make(chan attempt),
		desired: map[string]os.FileInfo{},
		sockets: map[string]*socket{},
	}
	logger.V(2).Info("Watching for plugins", "path", r.opts.Dir)
	if err := watcher.Add(r.opts.Dir); err != nil {
		return fmt.Errorf("grpcplugin: watch %s: %w", r.opts.Dir, err)
	}
	w.retry = time.NewTimer(time.Hour)
	w.retry.Stop()
	defer w.retry.Stop()
	resync := time.NewTicker(r.opts.ResyncPeriod)
	defer resync.Stop()
	w.scan()
	w.reconcile(ctx)
	for {
		select {
		case <-ctx.Done():
			w.stop(ctx)
			return nil
		case event, ok := <-watcher.Events:
			if !ok {
				return errors.New("grpcplugin: the directory watch ended")
			}
			w.handle(event)
		case err, ok := <-watcher.Errors:
			if !ok {
				return errors.New("grpcplugin: the directory watch ended")
			}
			logger.Error(err, "Watching the registration directory; reading it again")
			w.scan()
		case <-resync.C:
			w.scan()
		case <-w.retry.C:
		case a := <-w.results:
			w.finish(ctx, a)
		}
		w.reconcile(ctx)
	}
}

// dirWatch is the state of one Run: the sockets the directory holds
// (desired), and what became of each (sockets). Only Run's goroutine uses
// it; registration attempts run in goroutines of their own and report on
// results.
type dirWatch struct {
	r       *Registry
	logger  klog.Logger
	watcher *fsnotify.Watcher
	wg      sync.WaitGroup
	results chan attempt
	desired map[string]os.FileInfo
	sockets map[string]*socket
	retry   *time.Timer
}

// scan reads the directory tree again: what it finds replaces what the
// events said.
func (w *dirWatch) scan() {
	dir := w.r.opts.Dir
	found := map[string]os.FileInfo{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == dir {
				return err
			}
			return nil
		}
		if path != dir && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			if err := w.watcher.Add(path); err != nil {
				w.logger.Error(err, "Watching a directory", "path", path)
			}
			return nil
		}
		if d.Type()&fs.ModeSocket != 0 {
			if fi, err := os.Stat(path); err == nil {
				found[path] = fi
			}
		}
		return nil
	})
	if err != nil {
		w.logger.Error(err, "Reading the registration directory", "path", dir)
		return
	}
	for path, fi := range found {
		if !sameFile(w.desired[path], fi) {
			w.desired[path] = fi
		}
	}
	for path := range w.desired {
		if _, ok := found[path]; !ok {
			delete(w.desired, path)
		}
	}
}

// handle applies one event of the directory watch to desired.
func (w *dirWatch) handle(event fsnotify.Event) {
	path := event.Name
	switch {
	case event.Has(fsnotify.Create):
		if strings.HasPrefix(filepath.Base(path), ".") {
			return
		}
		fi, err := os.Stat(path)
		if err != nil {
			return // gone already; its Remove follows
		}
		if fi.IsDir() {
			w.scan() // watches it and finds what is in it already
			return
		}
		if fi.Mode()&fs.ModeSocket != 0 {
			w.desired[path] = fi
		}
	case event.Has(fsnotify.Remove), event.Has(fsnotify.Rename):
		for p := range w.desired {
			if p == path || strings.HasPrefix(p, path+string(filepath.Separator)) {
				delete(w.desired, p)
			}
		}
	}
}

// reconcile deregisters what is gone, starts a registration attempt for
// each socket that needs one and is not waiting out a backoff, and sets the
// retry timer for the first of those that are.
func (w *dirWatch) reconcile(ctx context.Context) {
	// Deregister first: a socket created again drops its old
	// registration before registering anew.
	for path, s := range w.sockets {
		if s.registered != nil && !sameFile(w.desired[path], s.registered.file) {
			w.r.deregister(ctx, s.registered, true)
			s.registered = nil
		}
	}
	now := time.Now()
	var next time.Duration
	for path, fi := range w.desired {
		s := w.sockets[path]
		if s == nil {
			s = &socket{}
			w.sockets[path] = s
		}
		if s.registered != nil || s.inFlight {
			continue
		}
		if sameFile(s.failed, fi) && now.Before(s.retryAt) {
			if wait := s.retryAt.Sub(now); next == 0 || wait < next {
				next = wait
			}
			continue
		}
		if !sameFile(s.failed, fi) {
			s.failures = 0
		}
		s.inFlight = true
		w.wg.Go(func() {
			p, err := w.r.register(ctx, path, fi)
			select {
			case w.results <- attempt{path: path, file: fi, plugin: p, err: err}:
			case <-ctx.Done():
				if p != nil {
					_ = p.conn.Close()
				}
			}
		})
	}
	for path, s := range w.sockets {
		if _, ok := w.desired[path]; !ok && s.registered == nil && !s.inFlight {
			delete(w.sockets, path)
		}
	}
	if next > 0 {
		w.retry.Reset(next)
	}
}

// finish records the outcome of a registration attempt.
func (w *dirWatch) finish(ctx context.Context, a attempt) {
	s := w.sockets[a.path]
	s.inFlight = false
	switch {
	case a.err != nil:
		s.failed, s.failures = a.file, s.failures+1
		backoff := min(initialBackoff<<min(s.failures-1, 10), maxBackoff)
		s.retryAt = time.Now().Add(backoff)
		w.logger.Error(a.err, "Registering a plugin failed", "path", a.path, "retryIn", backoff)
	case !sameFile(w.desired[a.path], a.file):
		// The socket went or was created again meanwhile.
		_ = a.plugin.conn.Close()
	default:
		s.failed, s.failures = nil, 0
		s.registered = a.plugin
		w.r.add(ctx, a.plugin)
	}
}

// stop waits for the attempts, which end with ctx and close what they
// opened, then deregisters every plugin and waits for their streams.
func (w *dirWatch) stop(ctx context.Context) {
	w.logger.V(2).Info("Stopping")
	w.wg.Wait()
	r := w.r
	r.mu.Lock()
	all := r.drivers
	r.drivers = map[string][]*plugin{}
	r.mu.Unlock()
	for _, list := range all {
		for _, p := range list {
			r.deregister(ctx, p, false)
		}
	}
	r.streams.Wait()
}

// register does what the kubelet does for a new registration socket:
// GetInfo, validation, the connection to the DRA endpoint, and
// NotifyRegistrationStatus.
func (r *Registry) register(ctx context.Context, path string, fi os.FileInfo) (*plugin, error) {
	logger := klog.FromContext(ctx).WithValues("path", path)
	// The socket file exists from bind() on, a moment before the plugin
	// listens: retry connecting soon instead of after gRPC's default 1s.
	conn, err := grpc.NewClient("unix:"+path, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second}}))
	if err != nil {
		return nil, fmt.Errorf("dial registration socket %s: %w", path, err)
	}
	defer func() { _ = conn.Close() }()
	client := registerapi.NewRegistrationClient(conn)

	infoCtx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	info, err := client.GetInfo(infoCtx, &registerapi.InfoRequest{}, grpc.WaitForReady(true))
	if err != nil {
		return nil, fmt.Errorf("failed to get plugin info using RPC GetInfo at socket %s: %w", path, err)
	}
	notify := func(registered bool, reason string) error {
		ctx, cancel := context.WithTimeout(ctx, notifyTimeout)
		defer cancel()
		if _, err := client.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: registered, Error: reason}); err != nil {
			if reason != "" {
				return fmt.Errorf("%s (and telling the plugin failed: %w)", reason, err)
			}
			return fmt.Errorf("failed to send registration status at socket %s: %w", path, err)
		}
		if reason != "" {
			return errors.New(reason)
		}
		return nil
	}
	if info.Type != registerapi.DRAPlugin {
		return nil, notify(false, fmt.Sprintf("RegisterPlugin error -- no handler registered for plugin type: %s at socket %s", info.Type, path))
	}
	endpoint := info.Endpoint
	if endpoint == "" {
		endpoint = path
	}
	service, err := chooseService(info.SupportedVersions)
	if err != nil {
		return nil, notify(false, fmt.Sprintf("RegisterPlugin error -- plugin validation failed with err: invalid supported gRPC versions of DRA driver plugin %s at endpoint %s: %v", info.Name, endpoint, err))
	}
	if info.Name == "" {
		return nil, notify(false, "RegisterPlugin error -- plugin validation failed with err: no driver name")
	}
	if other := r.endpointTaken(info.Name, endpoint); other != "" {
		return nil, notify(false, fmt.Sprintf("RegisterPlugin error -- plugin registration failed with err: endpoint %s already registered for DRA driver plugin %s (socket %s)", endpoint, info.Name, other))
	}
	draConn, err := grpc.NewClient("unix:"+endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, notify(false, fmt.Sprintf("RegisterPlugin error -- plugin registration failed with err: create gRPC connection to DRA driver %s plugin at endpoint %s: %v", info.Name, endpoint, err))
	}
	// Connect now so that a plugin that is not there shows early.
	draConn.Connect()
	p := &plugin{
		Plugin: Plugin{DriverName: info.Name, SocketPath: path, Endpoint: endpoint, Service: service,
			HealthService: chooseHealthService(info.SupportedVersions)},
		file: fi,
		conn: draConn,
	}
	if err := notify(true, ""); err != nil {
		_ = draConn.Close()
		return nil, err
	}
	logger.V(4).Info("Plugin accepted", "driverName", p.DriverName, "endpoint", endpoint, "service", service, "healthService", p.HealthService)
	return p, nil
}

// chooseService is the kubelet's validateSupportedServices.
func chooseService(supported []string) (string, error) {
	if len(supported) == 0 {
		return "", errors.New("empty list of supported gRPC services (aka supported versions)")
	}
	for _, service := range supported {
		if slices.Contains(servicesSupported, service) {
			return service, nil
		}
	}
	return "", fmt.Errorf("none of services supported by the plugin (%q) are supported by the kubelet (%q)", supported, servicesSupported)
}

// chooseHealthService is the kubelet's pickHealthService.
func chooseHealthService(supported []string) string {
	for _, service := range healthServicesSupported {
		if slices.Contains(supported, service) {
			return service
		}
	}
	return ""
}

// endpointTaken returns the registration socket of another plugin of the
// driver with the same endpoint.
func (r *Registry) endpointTaken(driverName, endpoint string) string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, p := range r.drivers[driverName] {
		if p.Endpoint == endpoint {
			return p.SocketPath
		}
	}
	return ""
}

// add makes a registered plugin callable and starts its health stream.
func (r *Registry) add(ctx context.Context, p *plugin) {
	logger := klog.FromContext(ctx)
	healthCtx, cancel := context.WithCancel(ctx)
	p.cancel = cancel
	r.mu.Lock()
	r.drivers[p.DriverName] = append(r.drivers[p.DriverName], p)
	n := len(r.drivers[p.DriverName])
	r.mu.Unlock()
	logger.V(2).Info("Registered DRA plugin", "driverName", p.DriverName, "path", p.SocketPath, "endpoint", p.Endpoint,
		"service", p.Service, "healthService", p.HealthService, "numPlugins", n)
	if r.opts.OnHealth != nil && p.HealthService != "" {
		r.streams.Go(func() { r.watchHealth(healthCtx, p) })
	}
	if r.opts.OnChange != nil {
		r.opts.OnChange(Event{Plugin: p.Plugin, Registered: true})
	}
}

// deregister drops a plugin: no more calls go to it, its health stream
// ends, its connection closes.
func (r *Registry) deregister(ctx context.Context, p *plugin, report bool) {
	r.mu.Lock()
	list := r.drivers[p.DriverName]
	if i := slices.Index(list, p); i >= 0 {
		list = slices.Delete(list, i, i+1)
	}
	if len(list) == 0 {
		delete(r.drivers, p.DriverName)
	} else {
		r.drivers[p.DriverName] = list
	}
	r.mu.Unlock()
	if report && r.opts.OnChange != nil {
		r.opts.OnChange(Event{Plugin: p.Plugin, Registered: false})
	}
	if p.cancel != nil {
		p.cancel()
	}
	if err := p.conn.Close(); err != nil {
		klog.FromContext(ctx).V(4).Info("Closing a plugin's connection", "driverName", p.DriverName, "err", err)
	}
	klog.FromContext(ctx).V(2).Info("Deregistered DRA plugin", "driverName", p.DriverName, "path", p.SocketPath, "endpoint", p.Endpoint)
}
