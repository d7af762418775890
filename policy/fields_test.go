package policy

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// TestFieldNamesAreTheProtos resolves every field name constant through
// the Policy message's descriptor: each must name a field of it, by its
// proto name, at the depth it says.
func TestFieldNamesAreTheProtos(t *testing.T) {
	for _, name := range []string{
		FieldFilesystemRead, FieldFilesystemReadRoots, FieldFilesystemWrite, FieldFilesystemReadOnly, FieldFilesystemDeny, FieldFilesystemLayer,
		FieldNetworkMode, FieldNetworkAllow,
		FieldLimitsTimeout, FieldLimitsMemoryBytes, FieldLimitsPids, FieldLimitsCPUMillis, FieldLimitsOutputBytes,
		FieldChildrenAllow,
	} {
		md := (&sandboxdv1.Policy{}).ProtoReflect().Descriptor()
		var fd protoreflect.FieldDescriptor
		for i, part := range strings.Split(name, ".") {
			if md == nil {
				t.Errorf("%s: %s is below a field that is not a message", name, part)
				break
			}
			if fd = md.Fields().ByName(protoreflect.Name(part)); fd == nil {
				t.Errorf("%s: %s has no field %q (component %d)", name, md.FullName(), part, i)
				break
			}
			md = fd.Message()
		}
	}
	if got := Index(FieldFilesystemWrite, 12); got != "filesystem.write[12]" {
		t.Errorf("Index = %q", got)
	}
}
