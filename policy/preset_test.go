package policy

import (
	"slices"
	"strings"
	"testing"
)

func TestPreset(t *testing.T) {
	tests := []struct {
		name, workspace string
		want            string
		wantErr         string
	}{
		{name: "read-only", want: `{}`},
		{name: "read-only", workspace: "ignored", want: `{}`},
		{name: "workspace-write", workspace: "/home/u/proj/",
			want: `{"filesystem":{"write":["/home/u/proj"],"read_only":["/home/u/proj/.git"]}}`},
		{name: "full-access", want: `{"filesystem":{"write":["/"]},"network":{"mode":"HOST"}}`},
		{name: "workspace-write", workspace: "proj", wantErr: `preset workspace-write: workspace "proj" is not absolute`},
		{name: "workspace-write", workspace: "", wantErr: "workspace path is empty"},
		{name: "yolo", wantErr: `unknown preset "yolo" (valid: read-only, workspace-write, full-access)`},
	}
	for _, tt := range tests {
		t.Run(tt.name+"/"+tt.workspace, func(t *testing.T) {
			got, err := Preset(tt.name, tt.workspace)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Preset: %v, want error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			assertEqual(t, got, Normalize(pol(t, tt.want)))
			if err := Validate(got); err != nil {
				t.Errorf("preset is invalid: %v", err)
			}
		})
	}
}

func TestPresetNames(t *testing.T) {
	names := PresetNames()
	if !slices.Equal(names, []string{"read-only", "workspace-write", "full-access"}) {
		t.Fatalf("PresetNames() = %v", names)
	}
	for _, n := range names {
		if _, err := Preset(n, "/w"); err != nil {
			t.Errorf("Preset(%q): %v", n, err)
		}
	}
	names[0] = "changed"
	if PresetNames()[0] != "read-only" {
		t.Error("PresetNames returns its internal slice")
	}
}
