// Package validate checks the Kubernetes manifests of deploy/kubernetes
// offline: each document decodes strictly into its k8s.io/api type (an
// unknown or misspelled field fails), and the parts sandboxd depends on are
// there. It is a module of its own so that sandboxd does not depend on the
// Kubernetes API.
package validate

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// documents splits a YAML stream at its "---" lines.
func documents(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, d := range bytes.Split(b, []byte("\n---\n")) {
		if len(bytes.TrimSpace(d)) > 0 {
			out = append(out, d)
		}
	}
	return out
}

// decode strictly decodes every document of path into the type its kind
// names, and returns them by kind.
func decode(t *testing.T, path string) map[string]any {
	t.Helper()
	objs := map[string]any{}
	for i, d := range documents(t, path) {
		var head struct{ APIVersion, Kind string }
		if err := yaml.Unmarshal(d, &head); err != nil {
			t.Fatalf("%s document %d: %v", path, i, err)
		}
		var obj any
		switch head.APIVersion + " " + head.Kind {
		case "v1 Namespace":
			obj = &corev1.Namespace{}
		case "v1 Pod":
			obj = &corev1.Pod{}
		case "apps/v1 DaemonSet":
			obj = &appsv1.DaemonSet{}
		default:
			t.Fatalf("%s document %d: %s %s is not a kind these manifests use", path, i, head.APIVersion, head.Kind)
		}
		if err := yaml.UnmarshalStrict(d, obj); err != nil {
			t.Fatalf("%s document %d (%s): %v", path, i, head.Kind, err)
		}
		objs[head.Kind] = obj
	}
	return objs
}

func mountOf(c corev1.Container, path string) string {
	for _, m := range c.VolumeMounts {
		if m.MountPath == path {
			return m.Name
		}
	}
	return ""
}

func hostPathOf(vols []corev1.Volume, name string) string {
	for _, v := range vols {
		if v.Name == name && v.HostPath != nil {
			return v.HostPath.Path
		}
	}
	return ""
}

const socketDir = "/run/sandboxd"

func TestDaemonSet(t *testing.T) {
	objs := decode(t, filepath.Join("..", "sandboxd-daemonset.yaml"))
	ds, ok := objs["DaemonSet"].(*appsv1.DaemonSet)
	if !ok {
		t.Fatal("no DaemonSet")
	}
	if ns, ok := objs["Namespace"].(*corev1.Namespace); !ok || ns.Name != ds.Namespace {
		t.Errorf("the DaemonSet's namespace %q is not the one the file makes", ds.Namespace)
	}
	spec := ds.Spec.Template.Spec
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers, want the daemon's", len(spec.Containers))
	}
	c := spec.Containers[0]
	args := strings.Join(c.Command, " ")
	for _, want := range []string{"--socket=" + socketDir + "/sandboxd.sock", "--state-dir=/var/lib/sandboxd"} {
		if !strings.Contains(args, want) {
			t.Errorf("daemon command %q lacks %s", args, want)
		}
	}
	if hostPathOf(spec.Volumes, mountOf(c, socketDir)) != socketDir {
		t.Errorf("the socket's directory is not the node's %s", socketDir)
	}
	if hostPathOf(spec.Volumes, mountOf(c, "/var/lib/sandboxd")) == "" {
		t.Error("the state directory is not on the node")
	}
	if sc := c.SecurityContext; sc == nil || sc.Privileged == nil || !*sc.Privileged {
		t.Error("the daemon is not privileged: it makes namespaces, ID-mapped mounts and cgroups")
	}
	for name, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		if p == nil || p.Exec == nil || !slices.Contains(p.Exec.Command, socketDir+"/sandboxd.sock") {
			t.Errorf("%s probe does not call the daemon on its socket: %+v", name, p)
		}
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
		t.Error("no CPU or memory request")
	}
	if sel, labels := ds.Spec.Selector.MatchLabels, ds.Spec.Template.Labels; len(sel) == 0 || !selects(sel, labels) {
		t.Errorf("selector %v does not select the template's labels %v", sel, labels)
	}
}

func selects(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func TestWorkerPod(t *testing.T) {
	objs := decode(t, filepath.Join("..", "worker-pod.yaml"))
	pod, ok := objs["Pod"].(*corev1.Pod)
	if !ok {
		t.Fatal("no Pod")
	}
	ds := decode(t, filepath.Join("..", "sandboxd-daemonset.yaml"))["DaemonSet"].(*appsv1.DaemonSet)
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("%d containers", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	if hostPathOf(pod.Spec.Volumes, mountOf(c, socketDir)) != socketDir {
		t.Errorf("the worker does not mount the node's %s", socketDir)
	}
	if len(c.Command) < 2 || filepath.Base(c.Command[0]) != "sandboxctl" || c.Command[1] != "run" {
		t.Errorf("the worker runs %q, not sandboxctl run", c.Command)
	}
	// Its workspace must be where the daemon has it too.
	dsWork := hostPathOf(ds.Spec.Template.Spec.Volumes, mountOf(ds.Spec.Template.Spec.Containers[0], "/var/lib/sandboxd-work"))
	for _, m := range c.VolumeMounts {
		hp := hostPathOf(pod.Spec.Volumes, m.Name)
		if m.MountPath == socketDir || hp == "" {
			continue
		}
		if dsWork == "" || !strings.HasPrefix(hp, dsWork+"/") || m.MountPath != hp {
			t.Errorf("worker mount %s (node %s) is not where the daemon has it", m.MountPath, hp)
		}
	}
	// The daemon's --socket-group must be one of the worker's groups.
	var group string
	for _, a := range ds.Spec.Template.Spec.Containers[0].Command {
		if g, ok := strings.CutPrefix(a, "--socket-group="); ok {
			group = g
		}
	}
	sc := pod.Spec.SecurityContext
	found := false
	for _, g := range sc.SupplementalGroups {
		found = found || group == strconv.FormatInt(g, 10)
	}
	if !found {
		t.Errorf("the worker's groups %v do not include the daemon's socket group %q", sc.SupplementalGroups, group)
	}
}
