package resource_test

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/draplane/draplane/apis/resource/v1"
	acv1 "github.com/draplane/draplane/generated/applyconfiguration/resource/v1"
	"github.com/draplane/draplane/generated/clientset/versioned/fake"
)

// TestGeneratedFakeClientApply checks that the generated apply-configuration
// schema knows our types: the fake clientset tracks managed fields with it.
func TestGeneratedFakeClientApply(t *testing.T) {
	c := fake.NewClientset()
	_, err := c.ResourceV1().ResourceClaims("ns").Create(context.Background(), &v1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ResourceV1().DeviceClasses().Apply(context.Background(), acv1.DeviceClass("gpu").WithSpec(acv1.DeviceClassSpec().WithSelectors(acv1.DeviceSelector().WithCEL(acv1.CELDeviceSelector().WithExpression("true")))), metav1.ApplyOptions{FieldManager: "t"})
	if err != nil {
		t.Fatal(err)
	}
}
