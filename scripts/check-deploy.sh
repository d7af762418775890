#!/bin/bash
# Checks what only runs elsewhere: the GitHub Actions workflow must be valid
# YAML whose macOS job runs the conformance suite natively, and the launchd
# plist must be a valid property list.
set -euo pipefail
cd "$(dirname "$0")/.."

python3 - <<'PY'
import plistlib, sys, yaml

with open(".github/workflows/ci.yml") as f:
    wf = yaml.safe_load(f)
steps = wf["jobs"]["macos"]["steps"]
runs = " ".join(s.get("run", "") for s in steps)
for want in ("go test -count=1 -timeout 20m ./...", "./internal/conformance/"):
    if want not in runs:
        sys.exit("check-deploy: the macos job does not run %r" % want)

with open("deploy/com.github.sandboxd.sandboxd.plist", "rb") as f:
    plist = plistlib.load(f)
if plist.get("ProgramArguments", [None])[0] != "/usr/local/bin/sandboxd":
    sys.exit("check-deploy: the launchd plist does not run /usr/local/bin/sandboxd")
PY
