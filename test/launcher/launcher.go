// Package launcher builds the dra-apiserver binary (and other commands of
// the module) and runs them as child processes, for the suites that drive
// the real binary: test/e2e, test/reliability and test/bench. A Process
// keeps everything its child prints; a Server is a dra-apiserver process
// that is ready once /readyz answers 200 to an anonymous client.
package launcher

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/draplane/draplane/internal/testing/testenv"
)

// BuildTags are the build tags of the binaries Build builds: the
// Makefile's BUILD_TAGS, so that a test run without make tests what make
// builds.
const BuildTags = "fieldsv1string"

// Build builds the main package pkg (relative to the module root, e.g.
// "./cmd/dra-apiserver") into out, with BuildTags and ldflags if any.
func Build(pkg, out string, ldflags ...string) error {
	args := []string{"build", "-tags", BuildTags}
	if len(ldflags) > 0 {
		args = append(args, "-ldflags", strings.Join(ldflags, " "))
	}
	build := exec.Command("go", append(args, "-o", out, pkg)...)
	build.Dir = testenv.RepoRoot()
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("build %s: %w", pkg, err)
	}
	return nil
}

// Process is one child process whose output, stdout and stderr, is kept.
type Process struct {
	Name   string
	Binary string
	Args   []string
	// SysProcAttr, if set, is used for every start (e.g. to kill the child
	// with the test process).
	SysProcAttr *syscall.SysProcAttr

	cmd    *exec.Cmd
	exited chan struct{}

	mu     sync.Mutex
	output bytes.Buffer
	// onLine sees every line the current run prints (under mu).
	onLine func(string)
}

// Start starts the process; its output so far is forgotten.
func (p *Process) Start() error {
	p.mu.Lock()
	p.output.Reset()
	p.mu.Unlock()
	p.cmd = exec.Command(p.Binary, p.Args...)
	p.cmd.SysProcAttr = p.SysProcAttr
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return err
	}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		return err
	}
	p.exited = make(chan struct{})
	if err := p.cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.Binary, err)
	}
	var scanned sync.WaitGroup
	scanned.Go(func() { p.keep(stdout) })
	scanned.Go(func() { p.keep(stderr) })
	exited, cmd := p.exited, p.cmd
	go func() {
		// Wait closes the pipes: read them to the end first.
		scanned.Wait()
		_ = cmd.Wait()
		close(exited)
	}()
	return nil
}

// keep appends every line of r to the output.
func (p *Process) keep(r io.Reader) {
	scanner := bufio.NewScanner(r)
	scanner.Buffer(make([]byte, 64<<10), 1<<20)
	for scanner.Scan() {
		line := scanner.Text()
		p.mu.Lock()
		p.output.WriteString(line + "\n")
		if p.onLine != nil {
			p.onLine(line)
		}
		p.mu.Unlock()
	}
}

// Output is everything the process printed in its current run.
func (p *Process) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.output.String()
}

// Running reports whether the process was started and has not exited.
func (p *Process) Running() bool {
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Exited is closed when the current run has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Pid is the process id of the current run.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Kill9 kills the process without warning, like a crash, and waits for it.
func (p *Process) Kill9() {
	if !p.Running() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// Stop terminates the process gracefully and waits for it (SIGKILL after a
// minute).
func (p *Process) Stop() {
	if !p.Running() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(time.Minute):
		p.Kill9()
	}
}

// Tail is the last n lines of output.
func Tail(output string, n int) string {
	lines := strings.Split(strings.TrimRight(output, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
