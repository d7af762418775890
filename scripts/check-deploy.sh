#!/bin/bash
# Checks what only runs elsewhere: the GitHub Actions workflow must be valid
# YAML whose macOS, Windows and Linux arm64 jobs run the tests and the
# conformance suite natively, and the launchd plist must be a valid property
# list.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 - <<'PY'
import plistlib, sys, yaml

with open(".github/workflows/ci.yml") as f:
    wf = yaml.safe_load(f)
wants = {
    "macos": ("go test -count=1 -timeout 20m ./...", "./internal/conformance/"),
    # ./... holds the conformance suite, which on Windows installs the
    # service it tests.
    "windows": ("go test -count=1 -timeout 20m ./...",),
    "linux-arm64": ("./launcher_linux/...", "./internal/conformance/"),
}
for job, want_runs in wants.items():
    runs = " ".join(s.get("run", "") for s in wf["jobs"][job]["steps"])
    for want in want_runs:
        if want not in runs:
            sys.exit("check-deploy: the %s job does not run %r" % (job, want))

with open("deploy/com.github.sandboxd.sandboxd.plist", "rb") as f:
    plist = plistlib.load(f)
if plist.get("ProgramArguments", [None])[0] != "/usr/local/bin/sandboxd":
    sys.exit("check-deploy: the launchd plist does not run /usr/local/bin/sandboxd")
PY

# The Kubernetes manifests, decoded strictly into the k8s.io/api types: a
# module of its own, so that sandboxd itself does not depend on that API.
(cd deploy/kubernetes/validate && go test -count=1 ./...)
