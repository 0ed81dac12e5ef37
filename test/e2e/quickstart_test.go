package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
)

// The README's quickstart lies between these markers. Its ```sh blocks are
// commands, one per line; a ```text block right after a ```sh block is the
// output of that block's last command.
const (
	quickstartBegin = "<!-- quickstart:begin -->"
	quickstartEnd   = "<!-- quickstart:end -->"
	// quickstartGap in an expected output stands for any number of lines.
	quickstartGap = "..."
)

// quickstartPlaceholders stand for one changing value in an expected
// output. Other <words> are literal: kubectl prints <none> and <unknown>.
var quickstartPlaceholders = map[string]string{
	// An event's age may be "5s" or "3s (x2 over 5s)".
	"<age>":    `\S+(?: \(x\d+ over \S+\))?`,
	"<time>":   `\S+`,
	"<suffix>": `[a-z0-9]+`,
	"<node>":   `[a-z0-9.-]+`,
	"<gpu>":    `[a-z0-9.-]+`,
	"<pod>":    `[a-z0-9.-]+`,
}

// quickstartStep is one command of the quickstart and, if the README shows
// it, its output.
type quickstartStep struct {
	line    int
	command string
	output  []string
}

// TestQuickstart runs every command of the README's quickstart, in order,
// as a user would: `make run` starts the server with the Makefile's
// RUN_ARGS (on a free port, with the default data dir under a temporary
// $HOME), every other line runs in bash in the repository root with that
// $HOME, and each output the README shows must match what the command
// printed. A command that fails fails the test.
func TestQuickstart(t *testing.T) {
	requireKubectl(t)
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	steps, err := parseQuickstart(string(readme))
	if err != nil {
		t.Fatalf("README.md: %v", err)
	}
	if len(steps) == 0 || steps[0].command != "make run" {
		t.Fatalf("the quickstart must start with `make run`, starts with %+v", steps[:min(1, len(steps))])
	}
	runArgs := makefileRunArgs(t)
	if !strings.Contains(strings.Join(runArgs, " "), "--simulate-nodes=") {
		t.Errorf("make run's RUN_ARGS %q start no simulated nodes; the quickstart needs them", runArgs)
	}

	home := t.TempDir()
	env := map[string]string{
		"HOME": home,
		"PATH": filepath.Dir(kubectlPath) + string(os.PathListSeparator) + os.Getenv("PATH"),
	}
	var server *testServer
	for _, step := range steps {
		where := fmt.Sprintf("README.md:%d `%s`", step.line, step.command)
		switch {
		case step.command == "make run":
			// What `make run` does, on a free port: the Makefile's
			// RUN_ARGS and the default data dir of this $HOME.
			server = startServer(t, filepath.Join(home, ".local", "state", "draplane"), runArgs...)
			continue
		case strings.HasPrefix(step.command, "export "):
			name, value, ok := strings.Cut(strings.TrimPrefix(step.command, "export "), "=")
			if !ok {
				t.Fatalf("%s: want export NAME=VALUE", where)
			}
			env[name] = os.Expand(value, func(v string) string { return env[v] })
			continue
		}
		if server == nil {
			t.Fatalf("%s: runs before `make run`", where)
		}
		if env["KUBECONFIG"] != server.Kubeconfig {
			t.Fatalf("%s: KUBECONFIG is %q, but the server wrote %s", where, env["KUBECONFIG"], server.Kubeconfig)
		}
		out, err := runQuickstartCommand(step.command, env)
		if err != nil {
			t.Fatalf("%s: %v\n%s\nserver output (tail):\n%s", where, err, out, tail(server.Output(), 40))
		}
		if step.output == nil {
			continue
		}
		if err := matchOutput(step.output, out); err != nil {
			t.Errorf("%s: the output differs from the README: %v\nREADME shows:\n%s\ngot:\n%s",
				where, err, strings.Join(step.output, "\n"), out)
		}
	}
}

// runQuickstartCommand runs one line in bash with only the given
// environment (plus what kubectl needs to find its cache).
func runQuickstartCommand(command string, env map[string]string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), pollTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", command)
	cmd.Dir = repoRoot
	for name, value := range env {
		cmd.Env = append(cmd.Env, name+"="+value)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// parseQuickstart reads the steps between the quickstart markers.
func parseQuickstart(readme string) ([]quickstartStep, error) {
	_, after, ok := strings.Cut(readme, quickstartBegin)
	if !ok {
		return nil, fmt.Errorf("no %s marker", quickstartBegin)
	}
	beginLine := strings.Count(readme[:len(readme)-len(after)], "\n") + 1
	section, _, ok := strings.Cut(after, quickstartEnd)
	if !ok {
		return nil, fmt.Errorf("no %s marker after %s", quickstartEnd, quickstartBegin)
	}
	var steps []quickstartStep
	lines := strings.Split(section, "\n")
	// lastBlockEnd is the index after the most recent ```sh block, when
	// only blank lines followed it.
	lastShEnd := -1
	for i := 0; i < len(lines); i++ {
		info, isFence := strings.CutPrefix(strings.TrimSpace(lines[i]), "```")
		if !isFence {
			if strings.TrimSpace(lines[i]) != "" {
				lastShEnd = -1
			}
			continue
		}
		start := i
		var body []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			body = append(body, lines[i])
		}
		if i == len(lines) {
			return nil, fmt.Errorf("line %d: code block not closed", beginLine+start)
		}
		switch info {
		case "sh":
			var pending string
			pendingLine := 0
			for j, line := range body {
				line = strings.TrimSpace(line)
				if pending != "" {
					line = pending + " " + line
					pending = ""
				} else {
					pendingLine = beginLine + start + 1 + j
				}
				if line == "" || strings.HasPrefix(line, "#") {
					continue
				}
				if strings.HasSuffix(line, "\\") {
					pending = strings.TrimSpace(strings.TrimSuffix(line, "\\"))
					continue
				}
				steps = append(steps, quickstartStep{line: pendingLine, command: line})
			}
			lastShEnd = i
		case "text":
			if lastShEnd < 0 || len(steps) == 0 {
				return nil, fmt.Errorf("line %d: a ```text block must follow a ```sh block", beginLine+start)
			}
			steps[len(steps)-1].output = body
			lastShEnd = -1
		default:
			return nil, fmt.Errorf("line %d: code block %q in the quickstart: use ```sh for commands and ```text for their output", beginLine+start, info)
		}
	}
	return steps, nil
}

// matchOutput checks that the actual output has the expected lines: runs
// of lines without "..." must match consecutive lines; the output may only
// have more lines where the README says "...".
func matchOutput(expected []string, actual string) error {
	var got []string
	scanner := bufio.NewScanner(strings.NewReader(actual))
	scanner.Buffer(make([]byte, 1<<20), 1<<20)
	for scanner.Scan() {
		got = append(got, strings.TrimRight(scanner.Text(), " \t"))
	}
	for len(got) > 0 && got[len(got)-1] == "" {
		got = got[:len(got)-1]
	}
	for len(expected) > 0 && strings.TrimSpace(expected[len(expected)-1]) == "" {
		expected = expected[:len(expected)-1]
	}
	if len(expected) == 0 {
		return nil
	}
	var segments [][]*regexp.Regexp
	var current []*regexp.Regexp
	for _, line := range expected {
		if strings.TrimSpace(line) == quickstartGap {
			segments = append(segments, current)
			current = nil
			continue
		}
		re, err := lineRegexp(line)
		if err != nil {
			return err
		}
		current = append(current, re)
	}
	segments = append(segments, current)
	matchesAt := func(segment []*regexp.Regexp, at int) bool {
		if at+len(segment) > len(got) {
			return false
		}
		for k, re := range segment {
			if !re.MatchString(got[at+k]) {
				return false
			}
		}
		return true
	}
	pos := 0
	for i, segment := range segments {
		first, last := i == 0, i == len(segments)-1
		switch {
		case len(segment) == 0:
			// Leading or trailing "...", or two in a row.
		case last && first:
			if len(got) != len(segment) || !matchesAt(segment, 0) {
				return fmt.Errorf("want exactly %d lines matching", len(segment))
			}
		case first:
			if !matchesAt(segment, 0) {
				return fmt.Errorf("the first lines do not match %q", segment[0].String())
			}
			pos = len(segment)
		case last:
			at := len(got) - len(segment)
			if at < pos || !matchesAt(segment, at) {
				return fmt.Errorf("the last lines do not match from %q on", segment[0].String())
			}
		default:
			found := false
			for at := pos; at+len(segment) <= len(got); at++ {
				if matchesAt(segment, at) {
					pos, found = at+len(segment), true
					break
				}
			}
			if !found {
				return fmt.Errorf("no lines match from %q on", segment[0].String())
			}
		}
	}
	return nil
}

var (
	placeholderPattern = regexp.MustCompile(`<[a-z]+>`)
	spacePattern       = regexp.MustCompile(`\s+`)
)

// lineRegexp turns an expected line into an anchored expression: runs of
// spaces match any run of spaces, placeholders their pattern, everything
// else itself.
func lineRegexp(line string) (*regexp.Regexp, error) {
	line = strings.TrimRight(line, " \t")
	var pattern strings.Builder
	pattern.WriteString("^")
	literal := func(s string) {
		for i, part := range spacePattern.Split(s, -1) {
			if i > 0 {
				pattern.WriteString(`\s+`)
			}
			pattern.WriteString(regexp.QuoteMeta(part))
		}
	}
	rest := line
	for {
		loc := placeholderPattern.FindStringIndex(rest)
		if loc == nil {
			literal(rest)
			break
		}
		literal(rest[:loc[0]])
		if p, ok := quickstartPlaceholders[rest[loc[0]:loc[1]]]; ok {
			pattern.WriteString(p)
		} else {
			pattern.WriteString(regexp.QuoteMeta(rest[loc[0]:loc[1]]))
		}
		rest = rest[loc[1]:]
	}
	pattern.WriteString("$")
	return regexp.Compile(pattern.String())
}

// makefileRunArgs is the default RUN_ARGS of `make run`.
func makefileRunArgs(t *testing.T) []string {
	t.Helper()
	makefile, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(makefile), "\n") {
		if value, ok := strings.CutPrefix(line, "RUN_ARGS ?="); ok {
			return strings.Fields(value)
		}
	}
	t.Fatal("Makefile has no `RUN_ARGS ?=` line")
	return nil
}

func tail(s string, lines int) string {
	all := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(all[max(0, len(all)-lines):], "\n")
}

// TestMatchOutput: the README comparison accepts what the README means and
// rejects drift.
func TestMatchOutput(t *testing.T) {
	actual := "NAME   STATUS   AGE\nsim-node-0   Ready   5s\nsim-node-1   Ready   3s (x2 over 5s)\n"
	tests := []struct {
		name     string
		expected []string
		ok       bool
	}{
		{name: "exact with placeholders", expected: []string{"NAME STATUS AGE", "sim-node-0 Ready <age>", "sim-node-1 Ready <age>"}, ok: true},
		{name: "column widths differ", expected: []string{"NAME         STATUS   AGE", "sim-node-0   Ready    <age>", "sim-node-1   Ready    <age>"}, ok: true},
		{name: "gap at the start", expected: []string{"...", "sim-node-1 Ready <age>"}, ok: true},
		{name: "gap in the middle", expected: []string{"NAME STATUS AGE", "...", "sim-node-1 Ready <age>"}, ok: true},
		{name: "gap at the end", expected: []string{"NAME STATUS AGE", "..."}, ok: true},
		{name: "placeholder in a token", expected: []string{"...", "sim-node-<node> Ready <age>", "..."}, ok: true},
		{name: "a line missing without a gap", expected: []string{"NAME STATUS AGE", "sim-node-1 Ready <age>"}},
		{name: "a value changed", expected: []string{"NAME STATUS AGE", "sim-node-0 NotReady <age>", "sim-node-1 Ready <age>"}},
		{name: "an extra line", expected: []string{"NAME STATUS AGE", "sim-node-0 Ready <age>", "sim-node-1 Ready <age>", "sim-node-2 Ready <age>"}},
		{name: "order differs", expected: []string{"...", "sim-node-1 Ready <age>", "sim-node-0 Ready <age>", "..."}},
		{name: "<none> is literal", expected: []string{"...", "sim-node-0 <none> <age>", "..."}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := matchOutput(tc.expected, actual)
			if (err == nil) != tc.ok {
				t.Errorf("match error %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

// TestParseQuickstart: commands, outputs and their README lines; blocks in
// the wrong place are refused rather than skipped.
func TestParseQuickstart(t *testing.T) {
	readme := "intro\n```sh\nnot run\n```\n" + quickstartBegin + "\ntext\n```sh\nmake run\n# comment\nkubectl get \\\n  nodes\n```\n\n```text\nNAME\n```\n" + quickstartEnd + "\n"
	steps, err := parseQuickstart(readme)
	if err != nil {
		t.Fatal(err)
	}
	want := []quickstartStep{{line: 8, command: "make run"}, {line: 10, command: "kubectl get nodes", output: []string{"NAME"}}}
	if fmt.Sprint(steps) != fmt.Sprint(want) {
		t.Errorf("steps %+v, want %+v", steps, want)
	}
	for name, bad := range map[string]string{
		"text without sh":  quickstartBegin + "\n```text\nx\n```\n" + quickstartEnd,
		"text after prose": quickstartBegin + "\n```sh\nls\n```\nprose\n```text\nx\n```\n" + quickstartEnd,
		"other language":   quickstartBegin + "\n```bash\nls\n```\n" + quickstartEnd,
		"no end marker":    quickstartBegin + "\n```sh\nls\n```\n",
	} {
		if _, err := parseQuickstart(bad); err == nil {
			t.Errorf("%s: parsed without error", name)
		}
	}
}

// TestSimulatedPodLifecycle: with --simulate-pod-duration, pods that cannot
// restart run and then Succeed; their generated claims are created,
// allocated, reserved and deleted, and the freed devices go to pods that
// waited for them (two nodes with one GPU each, three pods).
func TestSimulatedPodLifecycle(t *testing.T) {
	s := startServer(t, t.TempDir(), "--simulate-nodes=2", "--simulate-devices-per-node=1", "--simulate-pod-duration=2s")
	ctx := context.Background()
	kube, err := kubernetes.NewForConfig(s.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	claims := s.Client(t).ResourceV1().ResourceClaims("default")
	watcher, err := claims.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Stop()

	s.MustKubectl(t, "", "apply", "-f", filepath.Join(repoRoot, "examples", "quickstart", "01-deviceclass.yaml"),
		"-f", filepath.Join(repoRoot, "examples", "quickstart", "02-resourceclaimtemplates.yaml"))
	var pods strings.Builder
	for i := range 3 {
		pods.WriteString(claimPodYAML(fmt.Sprintf("job-%d", i), "gpu", "template=one-gpu", "restartPolicy: Never") + "---\n")
	}
	s.MustKubectl(t, pods.String(), "apply", "-f", "-")

	// Follow the generated claims until all three were deleted again.
	reserved, deleted := map[string]bool{}, map[string]bool{}
	timeout := time.After(pollTimeout)
	for len(deleted) < 3 {
		select {
		case event, ok := <-watcher.ResultChan():
			if !ok {
				t.Fatal("claim watch closed")
			}
			claim, ok := event.Object.(*resourcev1.ResourceClaim)
			if !ok {
				continue
			}
			switch {
			case event.Type == watch.Deleted:
				deleted[claim.Name] = true
			case claim.Status.Allocation != nil && len(claim.Status.ReservedFor) == 1:
				reserved[claim.Name] = true
			}
		case <-timeout:
			t.Fatalf("claims reserved %v, deleted %v after %v\n%s", reserved, deleted, pollTimeout,
				s.MustKubectl(t, "", "get", "pods,resourceclaims", "-o", "wide"))
		}
	}
	for name := range deleted {
		if !reserved[name] {
			t.Errorf("claim %s was deleted without having been seen allocated and reserved", name)
		}
	}
	for i := range 3 {
		pod, err := kube.CoreV1().Pods("default").Get(ctx, fmt.Sprintf("job-%d", i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if pod.Status.Phase != corev1.PodSucceeded || !strings.HasPrefix(pod.Spec.NodeName, "sim-node-") {
			t.Errorf("pod %s on %q is %s, want Succeeded on a simulated node", pod.Name, pod.Spec.NodeName, pod.Status.Phase)
		}
		for _, status := range pod.Status.ContainerStatuses {
			if status.State.Terminated == nil || status.State.Terminated.ExitCode != 0 {
				t.Errorf("pod %s container %s: %+v, want terminated with exit code 0", pod.Name, status.Name, status.State)
			}
		}
		// Every writer of the pod keeps its managedFields entry: the
		// pods store writes its updates from the shared informer's copy
		// of the pod, which must hold them.
		for _, want := range []struct {
			manager     string
			op          metav1.ManagedFieldsOperationType
			subresource string
		}{
			{"kubectl-client-side-apply", metav1.ManagedFieldsOperationUpdate, ""},
			{"draplane-resourceclaim-controller", metav1.ManagedFieldsOperationUpdate, "status"},
			{"simulator", metav1.ManagedFieldsOperationUpdate, "status"},
		} {
			if !slices.ContainsFunc(pod.ManagedFields, func(e metav1.ManagedFieldsEntry) bool {
				return e.Manager == want.manager && e.Operation == want.op && e.Subresource == want.subresource && e.FieldsV1 != nil
			}) {
				t.Errorf("pod %s has no managedFields entry of %s (%s %q): %+v", pod.Name, want.manager, want.op, want.subresource, pod.ManagedFields)
			}
		}
	}
}

// TestSimulatedNodesWithoutPods: with --simulate-pods=false the simulated
// nodes are Ready with their slices and pods are placed on them, but the
// pods stay Pending, as on nodes without a kubelet; deleting one still
// finishes, and its claim goes with it.
func TestSimulatedNodesWithoutPods(t *testing.T) {
	s := startServer(t, t.TempDir(), "--simulate-nodes=2", "--simulate-devices-per-node=1", "--simulate-pods=false")
	kube, err := kubernetes.NewForConfig(s.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	claims := s.Client(t).ResourceV1().ResourceClaims("default")
	s.MustKubectl(t, "", "apply", "-f", filepath.Join(repoRoot, "examples", "quickstart", "01-deviceclass.yaml"),
		"-f", filepath.Join(repoRoot, "examples", "quickstart", "02-resourceclaimtemplates.yaml"))
	s.MustKubectl(t, claimPodYAML("idle", "gpu", "template=one-gpu"), "apply", "-f", "-")

	var claimName string
	waitFor(t, "pod bound with its claim allocated and reserved", func(ctx context.Context) (bool, error) {
		pod, err := kube.CoreV1().Pods("default").Get(ctx, "idle", metav1.GetOptions{})
		if err != nil || pod.Spec.NodeName == "" || len(pod.Status.ResourceClaimStatuses) != 1 || pod.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
			return false, err
		}
		claimName = *pod.Status.ResourceClaimStatuses[0].ResourceClaimName
		claim, err := claims.Get(ctx, claimName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return claim.Status.Allocation != nil && len(claim.Status.ReservedFor) == 1, nil
	})
	pod, err := kube.CoreV1().Pods("default").Get(context.Background(), "idle", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitForEvent(t, kube, pod, corev1.EventTypeNormal, "Scheduled")
	// With the simulated kubelets on, a bound pod with an allocated claim
	// runs within moments (TestSimulatedPodLifecycle); give them time.
	time.Sleep(2 * time.Second)
	pod, err = kube.CoreV1().Pods("default").Get(context.Background(), "idle", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Status.Phase != corev1.PodPending || len(pod.Status.ContainerStatuses) != 0 {
		t.Errorf("pod on %s is %s with container statuses %v, want Pending with none", pod.Spec.NodeName, pod.Status.Phase, pod.Status.ContainerStatuses)
	}
	if got := s.MustKubectl(t, "", "get", "nodes", "-o", "jsonpath={.items[*].status.conditions[?(@.type==\"Ready\")].status}"); got != "True True" {
		t.Errorf("nodes Ready: %q, want True True", got)
	}
	s.MustKubectl(t, "", "delete", "pod", "idle", "--grace-period=1", "--timeout=60s")
	waitFor(t, "claim deleted with its pod", func(ctx context.Context) (bool, error) {
		_, err := claims.Get(ctx, claimName, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// TestSimulatorRestart: a restart with fewer nodes removes the nodes and
// slices no longer simulated and publishes the others' slices anew with a
// higher pool generation; a hand-written slice of the same driver for
// another node is left alone.
func TestSimulatorRestart(t *testing.T) {
	s := startServer(t, t.TempDir(), "--simulate-nodes=3", "--simulate-devices-per-node=2")
	ctx := context.Background()
	s.MustKubectl(t, `apiVersion: resource.draplane.dev/v1
kind: ResourceSlice
metadata:
  name: by-hand
spec:
  driver: gpu.sim.draplane.dev
  nodeName: node-1
  pool:
    name: node-1
    generation: 1
    resourceSliceCount: 1
`, "apply", "-f", "-")

	s.Stop()
	s.args = []string{"--simulate-nodes=2", "--simulate-devices-per-node=4"}
	s.Restart(t)
	// The stopped server could not release its lease, so the restarted
	// simulator starts once the lease expires.
	client := s.Client(t)
	want := map[string]string{
		"sim-node-0-gpu.sim.draplane.dev": "generation 2, 4 devices",
		"sim-node-1-gpu.sim.draplane.dev": "generation 2, 4 devices",
		"by-hand":                         "generation 1, 0 devices",
	}
	var got map[string]string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, pollTimeout, true, func(ctx context.Context) (bool, error) {
		list, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		got = map[string]string{}
		for _, slice := range list.Items {
			got[slice.Name] = fmt.Sprintf("generation %d, %d devices", slice.Spec.Pool.Generation, len(slice.Spec.Devices))
		}
		return fmt.Sprint(got) == fmt.Sprint(want), nil
	})
	if err != nil {
		t.Fatalf("slices after restart: %v\n%v\nwant\n%v", err, got, want)
	}
	if out := s.MustKubectl(t, "", "get", "nodes", "-o", "name"); out != "node/sim-node-0\nnode/sim-node-1\n" {
		t.Errorf("nodes after restart:\n%s", out)
	}
}
