// Package install registers resource.draplane.dev, all its versions and
// their conversions into a scheme.
package install

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	"github.com/draplane/draplane/apis/resource"
	v1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/apis/resource/v1beta1"
)

// Install registers the internal types and every served version, v1 first
// so it is the preferred (and storage) version.
func Install(scheme *runtime.Scheme) {
	utilruntime.Must(resource.AddToScheme(scheme))
	utilruntime.Must(v1.AddToScheme(scheme))
	utilruntime.Must(v1beta1.AddToScheme(scheme))
	utilruntime.Must(scheme.SetVersionPriority(v1.SchemeGroupVersion, v1beta1.SchemeGroupVersion))
}
