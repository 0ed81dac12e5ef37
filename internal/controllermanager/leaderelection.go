package controllermanager

import (
	"context"
	"os"
	"time"

	"github.com/google/uuid"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// LeaderElectionConfig says whether leader-elected work waits for a Lease,
// and with which timings (those of kube-controller-manager by default).
type LeaderElectionConfig struct {
	// Enabled makes replicas on one etcd share the work: only the holder
	// of a Lease runs what it guards.
	Enabled       bool
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
	// LeaseNamespace holds every Lease of the controller manager.
	LeaseNamespace string
}

// campaign is one kind of work that runs only while this replica holds its
// Lease. The log lines name the work, so that the leader of each Lease can
// be told apart in a replica's log.
type campaign struct {
	leaseName string
	// lead runs one term of leadership; it returns when ctx ends.
	lead func(ctx context.Context)
	// observe, if set, learns whether another replica holds the Lease.
	observe func(otherLeads bool)

	noLockMessage, startedMessage, stoppedMessage, otherLeaderMessage string
}

// runLeaderElected campaigns for c's Lease until ctx ends. Losing the Lease
// ends the term (and its context); the replica then campaigns again, so it
// can take over later with fresh work. The Lease is released when ctx
// ends, so that another replica takes over at once.
func runLeaderElected(ctx context.Context, kubeClient kubernetes.Interface, config LeaderElectionConfig, c campaign) {
	logger := klog.FromContext(ctx)
	hostname, _ := os.Hostname()
	identity := hostname + "_" + uuid.NewString()
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, config.LeaseNamespace, c.leaseName,
		nil, kubeClient.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: identity})
	if err != nil {
		logger.Error(err, c.noLockMessage)
		return
	}
	for ctx.Err() == nil {
		leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   config.LeaseDuration,
			RenewDeadline:   config.RenewDeadline,
			RetryPeriod:     config.RetryPeriod,
			ReleaseOnCancel: true,
			Name:            c.leaseName,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(leaderCtx context.Context) {
					logger.Info(c.startedMessage, "identity", identity)
					c.lead(leaderCtx)
				},
				OnStoppedLeading: func() {
					logger.Info(c.stoppedMessage, "identity", identity)
				},
				OnNewLeader: func(current string) {
					if c.observe != nil {
						c.observe(current != "" && current != identity)
					}
					if current != identity {
						logger.Info(c.otherLeaderMessage, "leader", current)
					}
				},
			},
		})
	}
}
