package policy

import "strconv"

// The policy's fields as errors, refusals, enforcement reports and denials
// name them: the path of the field in the Policy message, from its proto
// names. TestFieldNamesAreTheProtos checks each against the descriptors,
// so a renamed field cannot leave a stale name behind. An entry of a
// repeated field is named with its index, as Index spells it.
const (
	FieldFilesystemRead      = "filesystem.read"
	FieldFilesystemReadRoots = "filesystem.read_roots"
	FieldFilesystemWrite     = "filesystem.write"
	FieldFilesystemReadOnly  = "filesystem.read_only"
	FieldFilesystemDeny      = "filesystem.deny"
	FieldFilesystemLayer     = "filesystem.layer"
	FieldNetworkMode         = "network.mode"
	FieldNetworkAllow        = "network.allow"
	FieldLimitsTimeout       = "limits.timeout"
	FieldLimitsMemoryBytes   = "limits.memory_bytes"
	FieldLimitsPids          = "limits.pids"
	FieldLimitsCPUMillis     = "limits.cpu_millis"
	FieldLimitsOutputBytes   = "limits.output_bytes"
	FieldChildrenAllow       = "children.allow"
)

// Index names entry i of the repeated field, e.g. "filesystem.write[2]".
func Index(field string, i int) string {
	return field + "[" + strconv.Itoa(i) + "]"
}
