package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/types"
)

// cdiVersion is the CDI specification version of the files written.
const cdiVersion = "0.6.0"

// cdiSpec is a CDI spec file: the devices of one kind
// ("<vendor>/<class>"), each with the edits a runtime applies to a
// container that asks for "<kind>=<name>".
type cdiSpec struct {
	Version string      `json:"cdiVersion"`
	Kind    string      `json:"kind"`
	Devices []cdiDevice `json:"devices"`
}

type cdiDevice struct {
	Name           string            `json:"name"`
	ContainerEdits cdiContainerEdits `json:"containerEdits"`
}

type cdiContainerEdits struct {
	Env []string `json:"env,omitempty"`
}

// cdiSpecs writes one spec file per prepared claim into dir and removes it
// when the claim is unprepared, as a real driver does: a runtime finds
// the devices of a claim's CDI IDs only while its file is there, and a
// file left behind is a device still described to the runtime for a claim
// that is gone. An empty dir writes nothing.
type cdiSpecs struct {
	dir    string
	driver string
}

// path is the claim's spec file, named after its UID so that a claim
// prepared again rewrites the same file.
func (c cdiSpecs) path(claim types.UID) string {
	return filepath.Join(c.dir, fmt.Sprintf("%s-%s.json", c.driver, claim))
}

// tempPath is where the file is written before the rename. Its name is
// fixed per claim so that an unprepare also removes one left by a driver
// killed between the write and the rename.
func (c cdiSpecs) tempPath(claim types.UID) string {
	return filepath.Join(c.dir, fmt.Sprintf(".%s-%s.json.tmp", c.driver, claim))
}

// write writes the spec of a claim's devices atomically: a runtime reading
// the dir sees the old file or the new one, never half of one. A claim
// with no device of the driver gets none (CDI wants at least one device).
func (c cdiSpecs) write(claim types.UID, devices []string) error {
	if c.dir == "" || len(devices) == 0 {
		return nil
	}
	spec := cdiSpec{Version: cdiVersion, Kind: c.driver + "/gpu"}
	for _, name := range devices {
		spec.Devices = append(spec.Devices, cdiDevice{Name: name, ContainerEdits: cdiContainerEdits{Env: []string{
			"UPSTREAM_DEVICE=" + name,
			"UPSTREAM_CLAIM_UID=" + string(claim),
		}}})
	}
	data, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	tmp := c.tempPath(claim)
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("write CDI spec of claim %s: %w", claim, err)
	}
	if err := os.Rename(tmp, c.path(claim)); err != nil {
		return fmt.Errorf("write CDI spec of claim %s: %w", claim, err)
	}
	return nil
}

// remove deletes a claim's spec; a claim without one (never prepared
// here, or unprepared before) is no error.
func (c cdiSpecs) remove(claim types.UID) error {
	if c.dir == "" {
		return nil
	}
	var errs []error
	for _, path := range []string{c.path(claim), c.tempPath(claim)} {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("remove CDI spec of claim %s: %w", claim, err)
	}
	return nil
}
