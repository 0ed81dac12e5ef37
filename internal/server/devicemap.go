package server

import (
	"net/http"

	apirequest "k8s.io/apiserver/pkg/endpoints/request"
	genericapiserver "k8s.io/apiserver/pkg/server"

	"github.com/draplane/draplane/allocator/capacity"
	"github.com/draplane/draplane/internal/server/devicemap"
)

// installDeviceMap serves the device map page at devicemap.Path through
// the server's handler chain (the API's authentication and authorization,
// as the non-resource path /devicemap/*), fed by the process's shared
// informers once the server serves. Pending pods are shown when the
// informers see pods: core-lite's, or a host cluster's in cluster mode.
// ownerMark, in cluster mode, is the taint key of draplane's devices.
func installDeviceMap(generic *genericapiserver.GenericAPIServer, tracker *capacity.Tracker, inProcess *InProcess, pods bool, ownerMark string) error {
	devicemap.RegisterMetrics()
	m := devicemap.New(tracker)
	m.SetOwnerMark(ownerMark)
	stop := make(chan struct{})
	handler := m.Handler(stop)
	generic.Handler.NonGoRestfulMux.Handle(devicemap.Path[:len(devicemap.Path)-1], handler)
	generic.Handler.NonGoRestfulMux.HandlePrefix(devicemap.Path, handler)
	return generic.AddPostStartHook("start-devicemap", func(hook genericapiserver.PostStartHookContext) error {
		informers, err := inProcess.Informers(hook.LoopbackClientConfig)
		if err != nil {
			return err
		}
		inf := devicemap.Informers{Resource: informers.Resource.Resource().V1()}
		if pods {
			inf.Pods = informers.Kube.Core().V1().Pods()
		}
		if err := m.Start(hook.Context, inf); err != nil {
			return err
		}
		informers.Start(hook.Done())
		go func() {
			<-hook.Done()
			close(stop)
		}()
		return nil
	})
}

// deviceMapLongRunning makes the device map's event stream a long-running
// request, as watches are: no request timeout, not counted in flight.
func deviceMapLongRunning(generic *genericapiserver.RecommendedConfig) {
	base := generic.LongRunningFunc
	generic.LongRunningFunc = func(r *http.Request, info *apirequest.RequestInfo) bool {
		if info != nil && !info.IsResourceRequest && info.Path == devicemap.EventsPath {
			return true
		}
		return base != nil && base(r, info)
	}
}
