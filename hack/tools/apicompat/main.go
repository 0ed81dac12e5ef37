// Command apicompat fails when the served API of HEAD breaks clients of a
// frozen release. It compares two directories of api/openapi-spec (the
// OpenAPI v3 document of every served group-version plus served.json) and
// prints each breaking change with its path, one a line:
//
//	BREAKING: resource.draplane.dev/v1 ResourceClaim spec.devices.requests[].name: field removed (or renamed)
//
// In a path, "[]" stands for the items of a list and "{}" for the values
// of a map. A break that is deliberate is accepted by adding its line
// (without "BREAKING: ") to the allow-list file, with a comment that says
// why; an entry that matches nothing is an error, so the list never holds
// stale entries.
//
// Usage: apicompat -old api/openapi-spec/v0.1.0 -new api/openapi-spec/HEAD [-allow hack/api-compat-allowed.list] [-old-without-enums]
//
// hack/verify-api-compat.sh also runs it with -old api/openapi-spec/kubernetes:
// resource.k8s.io/v1 as Kubernetes itself serves it, which the served
// resource.k8s.io/v1 must not break either.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

func main() {
	oldDir := flag.String("old", "", "directory of the frozen release (api/openapi-spec/vX.Y.Z)")
	newDir := flag.String("new", "", "directory of the API to check (api/openapi-spec/HEAD)")
	allowFile := flag.String("allow", "", "file of accepted breaks, one a line; # starts a comment")
	oldWithoutEnums := flag.Bool("old-without-enums", false, "the old documents leave enums out (Kubernetes' api/openapi-spec, generated with OpenAPIEnums=false): an enum they lack is not a tightening")
	flag.Parse()
	if *oldDir == "" || *newDir == "" {
		flag.Usage()
		os.Exit(2)
	}
	os.Exit(run(os.Stdout, *oldDir, *newDir, *allowFile, *oldWithoutEnums))
}

func run(out io.Writer, oldDir, newDir, allowFile string, oldWithoutEnums bool) int {
	old, err := LoadRelease(oldDir)
	if err != nil {
		fmt.Fprintf(out, "error: %v\n", err)
		return 2
	}
	old.WithoutEnums = oldWithoutEnums
	head, err := LoadRelease(newDir)
	if err != nil {
		fmt.Fprintf(out, "error: %v\n", err)
		return 2
	}
	allowed := map[string]bool{}
	if allowFile != "" {
		if allowed, err = readAllowList(allowFile); err != nil {
			fmt.Fprintf(out, "error: %v\n", err)
			return 2
		}
	}
	status := 0
	used := map[string]bool{}
	accepted := 0
	for _, b := range Compare(old, head) {
		if allowed[b] {
			used[b] = true
			accepted++
			continue
		}
		fmt.Fprintf(out, "BREAKING: %s\n", b)
		status = 1
	}
	for _, entry := range sortedKeys(allowed) {
		if !used[entry] {
			fmt.Fprintf(out, "STALE: %s: %s lists a break that does not occur; remove it\n", allowFile, entry)
			status = 1
		}
	}
	if status == 0 {
		fmt.Fprintf(out, "no breaking change from %s to %s (%d accepted in %s)\n", oldDir, newDir, accepted, allowFile)
	}
	return status
}

func readAllowList(path string) (map[string]bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	allowed := map[string]bool{}
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		line := strings.TrimSpace(scanner.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		allowed[line] = true
	}
	return allowed, scanner.Err()
}
