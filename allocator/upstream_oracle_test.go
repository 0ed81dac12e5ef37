package allocator

import (
	"bufio"
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// TestUpstreamErrorsOracle is the second half of `make test-upstream-diff`:
// the differential test against the upstream allocator
// (testdata/upstream) writes the seeds of the instances upstream could not
// judge (it returned an error, gave up, or would need DeviceTaintRules),
// with our verdict on each; here every one is rebuilt and judged by the
// brute force, which must agree with the allocator.
//
// The upstream module's generator is a copy of randomInstance that differs
// only in the selector language (CEL there, the fake compiler's syntax
// here) and in never naming the class whose selector errs: the sixth class
// name is "a" there and "err" here. Both draw the same random numbers, so
// renaming "err" to "a" rebuilds the same instance; that our allocator
// gives the verdict recorded in the upstream module confirms it.
func TestUpstreamErrorsOracle(t *testing.T) {
	path := os.Getenv("DRAPLANE_UPSTREAM_ORACLE_SEEDS")
	if path == "" {
		t.Skip("run by make test-upstream-diff, which writes DRAPLANE_UPSTREAM_ORACLE_SEEDS")
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a := New(Options{Selectors: fakeCompiler{}, NewShareID: func() types.UID { return "share" }})
	checked, feasible, failures := 0, 0, 0
	reasons := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.SplitN(sc.Text(), " ", 3)
		if len(fields) != 3 {
			t.Fatalf("malformed line %q", sc.Text())
		}
		seed, err := strconv.ParseUint(fields[0], 10, 64)
		if err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		upstreamSide := fields[1] == "true"
		reason := fields[2]
		if i := strings.Index(reason, ": "); i >= 0 && strings.HasPrefix(reason, "upstream error") {
			reason = "upstream error"
		}
		reasons[reason]++
		in := upstreamVariant(randomInstance(seed))
		res, err := runChecked(context.Background(), a, in)
		if err != nil {
			t.Errorf("seed %d: %v", seed, err)
			continue
		}
		want := oracleFeasible(in)
		checked++
		if want {
			feasible++
		}
		switch {
		case res.Fits() != upstreamSide:
			failures++
			t.Errorf("seed %d: not the instance the upstream module built: there ours fits=%v, here %v", seed, upstreamSide, res.Fits())
		case res.Fits() != want:
			failures++
			t.Errorf("seed %d (%s): allocator fits=%v, brute force %v; %s", seed, fields[2], res.Fits(), want, res.Explanation.Summary())
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatal("no instances to check: the upstream module wrote none")
	}
	t.Logf("%d instances upstream could not judge %v: %d feasible, %d agree with the brute force, %d disagree", checked, reasons, feasible, checked-failures, failures)
}

// upstreamVariant renames the class the upstream generator never uses.
func upstreamVariant(in *instance) *instance {
	rename := func(name *string) {
		if *name == "err" {
			*name = "a"
		}
	}
	for _, c := range in.claims {
		for i := range c.Spec.Devices.Requests {
			r := &c.Spec.Devices.Requests[i]
			if r.Exactly != nil {
				rename(&r.Exactly.DeviceClassName)
			}
			for j := range r.FirstAvailable {
				rename(&r.FirstAvailable[j].DeviceClassName)
			}
		}
	}
	return in
}
