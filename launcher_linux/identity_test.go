package launcherlinux

import "testing"

func TestIdentityFilesNameTheSandboxUIDOnce(t *testing.T) {
	passwd := "root:x:0:0:root:/root:/bin/bash\nsandbox:x:900:900::/:/bin/sh"
	group := "root:x:0:\n"
	p, g := identityFiles(passwd, group, 65533, 65533)
	if want := passwd + "\nsandbox-65533:x:65533:65533:sandboxd sandbox:/:/bin/sh\n"; p != want {
		t.Errorf("passwd:\n%s\nwant:\n%s", p, want)
	}
	if want := group + "sandbox:x:65533:\n"; g != want {
		t.Errorf("group:\n%s\nwant:\n%s", g, want)
	}
	// Ids the host names keep the host's files as they are.
	if p, g := identityFiles(passwd, group, 900, 0); p != "" || g != "" {
		t.Errorf("identityFiles for named ids = %q, %q; want no change", p, g)
	}
}
