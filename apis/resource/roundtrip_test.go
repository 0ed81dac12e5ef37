package resource_test

import (
	"math/rand"
	"testing"

	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	"k8s.io/apimachinery/pkg/api/apitesting/roundtrip"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	"k8s.io/apimachinery/pkg/runtime"
	runtimeserializer "k8s.io/apimachinery/pkg/runtime/serializer"

	resourcefuzzer "github.com/draplane/draplane/apis/resource/fuzzer"
	"github.com/draplane/draplane/apis/resource/install"
)

// TestRoundTripHub fuzzes every internal kind and sends it through each
// external version (JSON) and back; nothing may be lost or changed.
func TestRoundTripHub(t *testing.T) {
	roundtrip.RoundTripTestForAPIGroup(t, install.Install, resourcefuzzer.Funcs)
}

// TestRoundTripExternal fuzzes every external kind directly, which checks
// the v1beta1-only shapes (flat requests, basic devices) through the hub.
func TestRoundTripExternal(t *testing.T) {
	scheme := runtime.NewScheme()
	install.Install(scheme)
	codecs := runtimeserializer.NewCodecFactory(scheme)
	filler := fuzzer.FuzzerFor(fuzzer.MergeFuzzerFuncs(metafuzzer.Funcs, resourcefuzzer.Funcs), rand.NewSource(rand.Int63()), codecs)
	roundtrip.RoundTripExternalTypesWithoutProtobuf(t, scheme, codecs, filler, nil)
}
