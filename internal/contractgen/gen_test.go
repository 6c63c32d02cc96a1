package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// moduleRoot is the module root seen from this package's directory, where
// go test runs.
const moduleRoot = "../.."

// TestGeneratedFilesAreCurrent fails when a contract changed without the
// generated Go files being regenerated.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	t.Parallel()
	files, err := Generate(moduleRoot)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{catalogueOut, errorsOut, statusOut, workflowOut}
	var got []string
	for path := range files {
		got = append(got, path)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("Generate wrote %v, want %v", got, want)
	}
	for path, src := range files {
		onDisk, err := os.ReadFile(filepath.Join(moduleRoot, filepath.FromSlash(path)))
		if err != nil {
			t.Fatalf("%s: %v; run `go generate .` in the module root", path, err)
		}
		if !bytes.Equal(onDisk, src) {
			t.Errorf("%s is stale: run `go generate .` in the module root", path)
		}
	}
}

// copyContracts copies the module's contracts into a temporary root, applies
// edit to the named contract (decoded as generic JSON) and returns the root.
func copyContracts(t *testing.T, name string, edit func(doc map[string]any)) string {
	t.Helper()
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "contracts"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{"errors.json", "run_event_stream.json", "workflow_events.v1.json"} {
		b, err := os.ReadFile(filepath.Join(moduleRoot, "contracts", file))
		if err != nil {
			t.Fatal(err)
		}
		if file == name {
			var doc map[string]any
			if err := json.Unmarshal(b, &doc); err != nil {
				t.Fatal(err)
			}
			edit(doc)
			if b, err = json.Marshal(doc); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(root, "contracts", file), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestGenerateRejectsBrokenContracts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		file    string
		edit    func(doc map[string]any)
		wantErr string
	}{
		{
			name: "duplicate error code",
			file: "errors.json",
			edit: func(doc map[string]any) {
				codes := doc["codes"].([]any)
				doc["codes"] = append(codes, codes[4])
			},
			wantErr: `duplicate error code "NOT_FOUND"`,
		},
		{
			name: "error code with a success status",
			file: "errors.json",
			edit: func(doc map[string]any) {
				doc["codes"].([]any)[1].(map[string]any)["status"] = 200
			},
			wantErr: `error code "INVALID_JSON" has status 200`,
		},
		{
			name: "event with unknown category",
			file: "run_event_stream.json",
			edit: func(doc map[string]any) {
				doc["events"].([]any)[2].(map[string]any)["category"] = "delivery"
			},
			wantErr: `event "run.delivery" has unknown category "delivery"`,
		},
		{
			name: "workflow event with unknown scope",
			file: "workflow_events.v1.json",
			edit: func(doc map[string]any) {
				doc["events"].([]any)[0].(map[string]any)["scope"] = "thread"
			},
			wantErr: `event "run.created" has scope "thread"`,
		},
		{
			name: "terminal event not in the list",
			file: "workflow_events.v1.json",
			edit: func(doc map[string]any) {
				doc["terminal_events"] = append(doc["terminal_events"].([]any), "run.aborted")
			},
			wantErr: "run.aborted",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := copyContracts(t, tt.file, tt.edit)
			_, err := Generate(root)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Generate = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestGenerateFromUnchangedCopy guards the test above: the copy itself,
// unedited, generates the same files as the module.
func TestGenerateFromUnchangedCopy(t *testing.T) {
	t.Parallel()
	want, err := Generate(moduleRoot)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Generate(copyContracts(t, "", nil))
	if err != nil {
		t.Fatal(err)
	}
	for path, src := range want {
		if !bytes.Equal(got[path], src) {
			t.Errorf("%s differs when generated from a copy", path)
		}
	}
}
