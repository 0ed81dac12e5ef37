package grpcplugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
	drahealthv1 "k8s.io/kubelet/pkg/apis/dra-health/v1"
	drahealthv1alpha1 "k8s.io/kubelet/pkg/apis/dra-health/v1alpha1"
)

// HealthStatus is a device's health as a plugin reports it.
type HealthStatus string

const (
	HealthStatusHealthy   HealthStatus = "Healthy"
	HealthStatusUnhealthy HealthStatus = "Unhealthy"
	HealthStatusUnknown   HealthStatus = "Unknown"
)

// HealthUpdate is one NodeWatchResources message of a driver's plugin.
// The plugin may cover all its devices or some of them (see
// k8s.io/kubelet/pkg/apis/dra-health/v1).
type HealthUpdate struct {
	DriverName string
	Devices    []DeviceHealth
}

// DeviceHealth is the health of one device.
type DeviceHealth struct {
	Pool, Device string
	Health       HealthStatus
	// Message is the plugin's detail, if any.
	Message string
	// LastUpdated is when the plugin determined the health; zero if it
	// did not say.
	LastUpdated time.Time
	// HealthCheckTimeout is how long the report holds (after it the
	// kubelet reports the device Unknown); zero if the plugin leaves it
	// to the default (30s in the kubelet).
	HealthCheckTimeout time.Duration
}

// watchHealth streams the plugin's device health to OnHealth until ctx
// ends (the plugin deregistered or Run returned), opening the stream again
// HealthRetryPeriod after it ends. A plugin that answers Unimplemented
// (it offers the service but reports no health) is not asked again; it
// would register again to change that, as with the kubelet.
func (r *Registry) watchHealth(ctx context.Context, p *plugin) {
	logger := klog.FromContext(ctx).WithValues("driverName", p.DriverName, "endpoint", p.Endpoint, "healthService", p.HealthService)
	for {
		err := r.streamHealth(ctx, p)
		if ctx.Err() != nil {
			return
		}
		if status.Code(err) == codes.Unimplemented {
			logger.V(2).Info("The plugin reports no device health; not asking again", "err", err)
			return
		}
		logger.V(3).Info("Device health stream ended; opening it again", "err", err, "in", r.opts.HealthRetryPeriod)
		select {
		case <-ctx.Done():
			return
		case <-time.After(r.opts.HealthRetryPeriod):
		}
	}
}

func (r *Registry) streamHealth(ctx context.Context, p *plugin) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var stream drahealthv1.DRAResourceHealth_NodeWatchResourcesClient
	var err error
	switch p.HealthService {
	case drahealthv1.DRAResourceHealthService:
		stream, err = drahealthv1.NewDRAResourceHealthClient(p.conn).NodeWatchResources(ctx, &drahealthv1.NodeWatchResourcesRequest{})
	case drahealthv1alpha1.DRAResourceHealthService:
		client := drahealthv1.V1Alpha1ClientWrapper{Client: drahealthv1alpha1.NewDRAResourceHealthClient(p.conn)}
		stream, err = client.NodeWatchResources(ctx, &drahealthv1.NodeWatchResourcesRequest{})
	default:
		return status.Error(codes.Unimplemented, fmt.Sprintf("unsupported health service %q", p.HealthService))
	}
	if err != nil {
		return err
	}
	klog.FromContext(ctx).V(3).Info("Device health stream open", "driverName", p.DriverName)
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return errors.New("the plugin ended the stream")
		}
		if err != nil {
			return err
		}
		update := HealthUpdate{DriverName: p.DriverName}
		for _, d := range resp.GetDevices() {
			h := DeviceHealth{
				Pool:               d.GetDevice().GetPoolName(),
				Device:             d.GetDevice().GetDeviceName(),
				Health:             healthStatus(d.GetHealth()),
				Message:            d.GetMessage(),
				HealthCheckTimeout: time.Duration(d.GetHealthCheckTimeoutSeconds()) * time.Second,
			}
			if t := d.GetLastUpdatedTime(); t > 0 {
				h.LastUpdated = time.Unix(t, 0)
			}
			update.Devices = append(update.Devices, h)
		}
		r.opts.OnHealth(update)
	}
}

func healthStatus(s drahealthv1.HealthStatus) HealthStatus {
	switch s {
	case drahealthv1.HealthStatus_HEALTHY:
		return HealthStatusHealthy
	case drahealthv1.HealthStatus_UNHEALTHY:
		return HealthStatusUnhealthy
	default:
		return HealthStatusUnknown
	}
}
