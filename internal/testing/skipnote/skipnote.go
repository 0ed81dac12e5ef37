// Package skipnote lets a test package that skips a whole suite say so in
// one line that shows in the output of a plain `go test ./...`.
//
// Without -v, the go command keeps a passing test binary's output to
// itself and prints only "ok <package>"; a suite that skipped every test
// would pass unseen. So the line goes to the go command's own standard
// error (on Linux, /proc/<parent>/fd/2 when the parent process is the go
// command), and to the binary's standard error otherwise (shown with -v,
// or when the parent is not the go command).
package skipnote

import (
	"fmt"
	"os"
	"strings"
)

// Print writes "SKIP <pkg>: <why>" once, where the person running the
// tests sees it.
func Print(pkg, why string) {
	line := fmt.Sprintf("SKIP  %s: %s\n", pkg, why)
	if f := goCommandStderr(); f != nil {
		defer f.Close()
		if _, err := f.WriteString(line); err == nil {
			return
		}
	}
	fmt.Fprint(os.Stderr, line)
}

// goCommandStderr opens the standard error of the parent process if it is
// the go command, or returns nil.
func goCommandStderr() *os.File {
	parent := os.Getppid()
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", parent))
	if err != nil || strings.TrimSpace(string(comm)) != "go" {
		return nil
	}
	f, err := os.OpenFile(fmt.Sprintf("/proc/%d/fd/2", parent), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return nil
	}
	return f
}
