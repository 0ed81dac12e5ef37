package aggregation

import (
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// startReplica runs one dra-apiserver replica with the shared flags, its
// own data dir and port.
func (e *env) startReplica(t *testing.T, name, binary, dataDir string, port int) <-chan struct{} {
	t.Helper()
	args := append([]string{"--data-dir=" + dataDir, "--secure-port=" + strconv.Itoa(port)}, e.replicaArgs...)
	return startProcess(t, name, binary, args...)
}

// waitReady waits for a replica's /readyz, checking its serving
// certificate against client's roots.
func (e *env) waitReady(t *testing.T, name string, port int, exited <-chan struct{}) {
	t.Helper()
	e.waitReadyWith(t, name, port, exited, e.draClient(nil))
}

func (e *env) waitReadyWith(t *testing.T, name string, port int, exited <-chan struct{}, client *http.Client) {
	t.Helper()
	poll(t, name+" /readyz", func() (bool, error) {
		if err := exitedErr(exited); err != nil {
			return false, err
		}
		resp, err := client.Get(fmt.Sprintf("https://127.0.0.1:%d/readyz", port))
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

// testReplicas: two replicas with data dirs of their own sign their
// serving certificates with one CA, the one in the Secret draplane-ca, so
// their caBundle injections agree and the aggregator trusts either. The
// APIServices are pointed at the second replica and back, reading through
// each what the other wrote.
func (e *env) testReplicas(t *testing.T) {
	// Ready, whatever CA signed it; which one is checked below.
	insecure := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	e.waitReadyWith(t, "dra-apiserver-1", e.draPort2, e.replica2Exited, insecure)

	cas := map[string][]byte{}
	for name, dir := range map[string]string{"dra-apiserver-0": e.draDataDir, "dra-apiserver-1": e.draDataDir2} {
		ca, err := os.ReadFile(filepath.Join(dir, "pki", "ca.crt"))
		if err != nil {
			t.Fatal(err)
		}
		cas[name] = ca
	}
	out, err := e.kubectl("get", "secret", "-n", "draplane-system", "draplane-ca", "-o", "jsonpath={.data.ca\\.crt}")
	if err != nil {
		t.Fatalf("the shared CA Secret: %v\n%s", err, out)
	}
	shared, err := base64.StdEncoding.DecodeString(out)
	if err != nil || len(shared) == 0 {
		t.Fatalf("the Secret draplane-ca holds no ca.crt: %v %q", err, out)
	}
	for name, ca := range cas {
		if !bytes.Equal(ca, shared) {
			t.Errorf("%s's CA is not the one in the Secret draplane-ca: the replicas would inject different caBundles", name)
		}
	}
	// Both injectors have run (the second was ready above); the bundle is
	// still the shared CA.
	for _, version := range []string{"v1", "v1beta1"} {
		out, err := e.kubectl("get", "apiservice", version+"."+group, "-o", "jsonpath={.spec.caBundle}")
		if err != nil {
			t.Fatal(err)
		}
		if bundle, err := base64.StdEncoding.DecodeString(out); err != nil || !bytes.Equal(bundle, shared) {
			t.Errorf("APIService %s.%s: spec.caBundle is not the shared CA", version, group)
		}
	}
	// The second replica's serving certificate verifies with that CA.
	e.waitReady(t, "dra-apiserver-1 (verified with the shared CA)", e.draPort2, e.replica2Exited)

	// The aggregator, given one caBundle, reaches either replica.
	class := `apiVersion: resource.draplane.dev/v1
kind: DeviceClass
metadata:
  name: %s
`
	pointAt := func(port int) {
		t.Helper()
		for _, version := range []string{"v1", "v1beta1"} {
			name := version + "." + group
			if out, err := e.kubectl("patch", "apiservice", name, "--type=json", "-p", fmt.Sprintf(`[{"op":"replace","path":"/spec/service/port","value":%d}]`, port)); err != nil {
				t.Fatalf("point %s at port %d: %v\n%s", name, port, err, out)
			}
		}
		// The aggregator's availability check dials the new port.
		poll(t, fmt.Sprintf("the APIServices Available on port %d", port), func() (bool, error) {
			out, err := e.kubectl("get", "apiservice", "v1."+group, "-o", `jsonpath={.status.conditions[?(@.type=="Available")].status}`)
			return err == nil && out == "True", nil
		})
	}
	if out, err := e.kubectlStdin(fmt.Sprintf(class, "written-through-0"), "create", "-f", "-"); err != nil {
		t.Fatalf("create through the first replica: %v\n%s", err, out)
	}
	pointAt(e.draPort2)
	t.Cleanup(func() { pointAt(e.draPort) })
	// The Service's port changed; a request may still meet a connection
	// to the old one until the aggregator notices.
	poll(t, "a DeviceClass written through the first replica, read through the second", func() (bool, error) {
		out, err := e.kubectl("get", "deviceclasses."+group, "written-through-0", "-o", "name")
		return err == nil && out != "", nil
	})
	if out, err := e.kubectlStdin(fmt.Sprintf(class, "written-through-1"), "create", "-f", "-"); err != nil {
		t.Fatalf("create through the second replica: %v\n%s", err, out)
	}
	for _, name := range []string{"written-through-0", "written-through-1"} {
		if out, err := e.kubectl("delete", "deviceclasses."+group, name); err != nil {
			t.Errorf("delete %s: %v\n%s", name, err, out)
		}
	}
}
