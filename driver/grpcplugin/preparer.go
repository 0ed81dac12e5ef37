package grpcplugin

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
	drapbv1beta1 "k8s.io/kubelet/pkg/apis/dra/v1beta1"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/driver"
)

// Preparer returns the driver.Preparer of a driver's plugins, and whether
// one is registered now. The preparer looks the plugin up on every call,
// so it follows plugin restarts; while none is registered its calls fail
// as a whole ("DRA driver ... is not registered").
func (r *Registry) Preparer(driverName string) (driver.Preparer, bool) {
	return &preparer{registry: r, driverName: driverName}, r.pick(driverName) != nil
}

type preparer struct {
	registry   *Registry
	driverName string
}

var _ driver.Preparer = &preparer{}

// client is the plugin's DRA client in v1 terms; v1beta1 goes through
// k8s.io/kubelet's conversion wrapper, as in the kubelet.
func (p *preparer) client() (drapbv1.DRAPluginClient, *plugin, error) {
	pl := p.registry.pick(p.driverName)
	if pl == nil {
		return nil, nil, fmt.Errorf("DRA driver %s is not registered", p.driverName)
	}
	switch pl.Service {
	case drapbv1.DRAPluginService:
		return drapbv1.NewDRAPluginClient(pl.conn), pl, nil
	case drapbv1beta1.DRAPluginService:
		return drapbv1beta1.V1Beta1ClientWrapper{DRAPluginClient: drapbv1beta1.NewDRAPluginClient(pl.conn)}, pl, nil
	default:
		return nil, nil, fmt.Errorf("internal error: unsupported DRA service %q", pl.Service)
	}
}

// PrepareResourceClaims calls NodePrepareResources once with all claims.
// Each device of the answer becomes one PreparedDevice per request it
// names (one with an empty Request if it names none: it serves every
// request of the claim); a claim's error string becomes its error.
func (p *preparer) PrepareResourceClaims(ctx context.Context, claims []*resourcev1.ResourceClaim) (map[types.UID]driver.PrepareResult, error) {
	client, pl, err := p.client()
	if err != nil {
		return nil, err
	}
	logger := klog.FromContext(ctx).WithValues("driverName", p.driverName, "endpoint", pl.Endpoint)
	req := &drapbv1.NodePrepareResourcesRequest{}
	for _, claim := range claims {
		req.Claims = append(req.Claims, &drapbv1.Claim{Namespace: claim.Namespace, Uid: string(claim.UID), Name: claim.Name})
	}
	ctx, cancel := context.WithTimeout(ctx, p.registry.opts.CallTimeout)
	defer cancel()
	logger.V(4).Info("Calling NodePrepareResources", "request", req)
	resp, err := client.NodePrepareResources(ctx, req)
	logger.V(4).Info("Done calling NodePrepareResources", "response", resp, "err", err)
	if err != nil {
		return nil, fmt.Errorf("NodePrepareResources of DRA driver %s: %w", p.driverName, err)
	}
	out := make(map[types.UID]driver.PrepareResult, len(resp.GetClaims()))
	for uid, answer := range resp.GetClaims() {
		if answer.GetError() != "" {
			out[types.UID(uid)] = driver.PrepareResult{Err: errors.New(answer.GetError())}
			continue
		}
		var result driver.PrepareResult
		for _, device := range answer.GetDevices() {
			requests := device.GetRequestNames()
			if len(requests) == 0 {
				requests = []string{""}
			}
			for _, request := range requests {
				result.Devices = append(result.Devices, driver.PreparedDevice{
					Request:      request,
					Pool:         device.GetPoolName(),
					Device:       device.GetDeviceName(),
					CDIDeviceIDs: append([]string(nil), device.GetCdiDeviceIds()...),
				})
			}
		}
		out[types.UID(uid)] = result
	}
	return out, nil
}

// UnprepareResourceClaims calls NodeUnprepareResources once with all
// claims; a claim's error string becomes its error.
func (p *preparer) UnprepareResourceClaims(ctx context.Context, claims []driver.NamespacedObject) (map[types.UID]error, error) {
	client, pl, err := p.client()
	if err != nil {
		return nil, err
	}
	logger := klog.FromContext(ctx).WithValues("driverName", p.driverName, "endpoint", pl.Endpoint)
	req := &drapbv1.NodeUnprepareResourcesRequest{}
	for _, claim := range claims {
		req.Claims = append(req.Claims, &drapbv1.Claim{Namespace: claim.Namespace, Uid: string(claim.UID), Name: claim.Name})
	}
	ctx, cancel := context.WithTimeout(ctx, p.registry.opts.CallTimeout)
	defer cancel()
	logger.V(4).Info("Calling NodeUnprepareResources", "request", req)
	resp, err := client.NodeUnprepareResources(ctx, req)
	logger.V(4).Info("Done calling NodeUnprepareResources", "response", resp, "err", err)
	if err != nil {
		return nil, fmt.Errorf("NodeUnprepareResources of DRA driver %s: %w", p.driverName, err)
	}
	out := make(map[types.UID]error, len(resp.GetClaims()))
	for uid, answer := range resp.GetClaims() {
		if answer.GetError() != "" {
			out[types.UID(uid)] = errors.New(answer.GetError())
		} else {
			out[types.UID(uid)] = nil
		}
	}
	return out, nil
}
