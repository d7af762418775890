package client

import (
	"sync"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// prepareResponseTypes readies the protobuf runtime for every message type
// a session's responses carry. The runtime builds a type's decoder by
// reflection on its first use, about 0.25 ms for a Started and an Exit in
// sandboxctl run; done once the Start is sent, it takes the time the
// daemon spends launching instead of following the Started that ends it.
var prepareResponseTypes = sync.OnceFunc(func() {
	prepare((&sandboxdv1.SessionResponse{}).ProtoReflect(), map[protoreflect.FullName]bool{})
})

// prepare readies m's type and those of its message fields.
func prepare(m protoreflect.Message, seen map[protoreflect.FullName]bool) {
	md := m.Descriptor()
	if seen[md.FullName()] {
		return
	}
	seen[md.FullName()] = true
	proto.Size(m.Interface())
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		switch {
		case fd.IsMap():
			if fd.MapValue().Message() != nil {
				prepare(m.NewField(fd).Map().NewValue().Message(), seen)
			}
		case fd.Message() == nil:
		case fd.IsList():
			prepare(m.NewField(fd).List().NewElement().Message(), seen)
		default:
			prepare(m.NewField(fd).Message(), seen)
		}
	}
}
