// Package grpcplugin is the kubelet's side of DRA kubelet plugins, for a
// node agent that runs real kubelet plugins without a kubelet: drivers
// built on k8s.io/dynamic-resource-allocation/kubeletplugin, or any other
// that speaks the kubelet's gRPC APIs.
//
// A [Registry] does what the kubelet's plugin manager and DRA plugin
// manager (pkg/kubelet/pluginmanager, pkg/kubelet/cm/dra/plugin) do:
//
//   - It watches a registration directory, the kubelet's
//     <root>/plugins_registry/, with fsnotify (subdirectories included,
//     names starting with "." and files that are not Unix sockets
//     ignored), and rescans it every [Options.ResyncPeriod] in case an
//     event was lost (an overflowing inotify queue). fsnotify rather than
//     polling alone: a plugin registers as soon as its socket appears, as
//     with the kubelet, without a poll interval on every node. A socket is
//     known by its file (device, inode, modification time), so a rescan
//     also notices one that was removed and created again between two
//     reads.
//   - For each socket it dials the registration service
//     (k8s.io/kubelet/pkg/apis/pluginregistration/v1), calls GetInfo,
//     accepts type "DRAPlugin" only, picks the DRA gRPC service the way
//     the kubelet does (the first entry of the plugin's SupportedVersions
//     that is "v1.DRAPlugin" or "v1beta1.DRAPlugin"; kubeletplugin lists
//     v1 first) and the newest health service it lists
//     ("v1.DRAResourceHealth", else "v1alpha1.DRAResourceHealth"),
//     connects to the plugin's DRA endpoint (the socket itself when the
//     plugin names none), and answers NotifyRegistrationStatus: true, or
//     false with the reason (the kubelet's wording).
//   - A registration that fails is retried with exponential backoff
//     (500ms doubling to 2 minutes), as the kubelet does.
//   - A socket that goes away deregisters its plugin and closes the
//     connection. A socket that is created again (a restarted plugin
//     removes its old socket and binds a new one) is a new file, so the
//     old registration goes and the plugin registers again on a fresh
//     connection: one registration per socket, never two.
//
// What it adds for the node agent: [Registry.Preparer] turns a driver name
// into a [driver.Preparer] that calls NodePrepareResources and
// NodeUnprepareResources of the chosen version (v1beta1 through the
// conversion wrappers of k8s.io/kubelet) with every claim of the call in
// one request; [Options.OnChange] reports registrations and
// deregistrations so pods of that driver can be synced again;
// [Options.OnHealth] receives the device health a plugin streams with
// NodeWatchResources (KEP-4680), reconnected while the plugin stays
// registered, as the kubelet does when its ResourceHealthStatus gate is on.
//
// Like the kubelet, a driver may have more than one registered plugin (a
// rolling update registers the new one before the old one goes); calls go
// to the newest whose connection is not failing.
package grpcplugin
