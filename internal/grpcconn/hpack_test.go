package grpcconn

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/net/http2/hpack"

	sandboxdv1 "github.com/sandboxd/sandboxd/api/sandboxd/v1"
)

// The client's HPACK is checked against golang.org/x/net/http2/hpack,
// which grpc-go's server encodes with and decodes the client's blocks
// with.

func xnetDecode(t testing.TB, d *hpack.Decoder, block []byte) ([]headerField, error) {
	t.Helper()
	hf, err := d.DecodeFull(block)
	if err != nil {
		return nil, err
	}
	var fields []headerField
	size := 0
	for _, f := range hf {
		// As http2's MaxHeaderListSize, which the client's decoder
		// applies itself.
		if size += int(f.Size()); size > maxHeaderList {
			return nil, errors.New("header list too large")
		}
		fields = append(fields, headerField{f.Name, f.Value})
	}
	return fields, nil
}

// TestHostileHeaderBlocks: blocks no server of the client's should send
// fail to decode, each for its own reason, and nothing a block names
// grows the client beyond the bounds.
func TestHostileHeaderBlocks(t *testing.T) {
	// A dynamic table entry of about 4000 bytes, then a one-byte index to
	// it over and over: a block of a few KiB decoding to megabytes.
	big := appendHeaderInt([]byte{0x40}, 7, 0, 1)
	big = append(big, 'x')
	big = appendHeaderInt(big, 7, 0, 4000)
	big = append(big, strings.Repeat("v", 4000)...)
	amplified := append(big, bytes.Repeat([]byte{0x80 | 62}, 300)...)
	for _, tc := range []struct {
		name  string
		block []byte
		want  string
	}{
		{"10-byte integer", append([]byte{0xff}, append(bytes.Repeat([]byte{0xff}, 9), 0x01)...), "integer too large"},
		{"table size update above 4096", []byte{0x3f, 0xe2, 0x1f}, "above 4096"},
		{"index past the tables", []byte{0x80 | 62}, "invalid index 62"},
		{"index 0", []byte{0x80}, "invalid index 0"},
		{"literal naming an index past the tables", []byte{0x0f, 0x30, 0x01, 'v'}, "invalid index 63"},
		{"string above the cap", appendHeaderInt([]byte{0x00}, 7, 0, maxHeaderString+1), "above 1048576"},
		{"Huffman string above the cap", appendHeaderInt([]byte{0x00}, 7, 0x80, maxHeaderString+1), "above 1048576"},
		{"string longer than the block", []byte{0x00, 0x05, 'a', 'b'}, "truncated"},
		{"Huffman padding of zeros", []byte{0x00, 0x81, 0x00, 0x00}, "invalid Huffman padding"},
		{"Huffman padding longer than 7 bits", []byte{0x00, 0x82, 0x1f, 0xff, 0x00}, "invalid Huffman padding"},
		{"decoded list above the cap", amplified, "header list of more than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fields, err := newHPACKDecoder().decode(tc.block)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("decoded to %d fields, error %v; want one saying %q", len(fields), err, tc.want)
			}
		})
	}
	// The same entry indexed within the cap still decodes.
	if fields, err := newHPACKDecoder().decode(append(big, bytes.Repeat([]byte{0x80 | 62}, 200)...)); err != nil || len(fields) != 201 {
		t.Errorf("a block within the cap: %d fields, %v", len(fields), err)
	}
}

func newXNetDecoder() *hpack.Decoder {
	d := hpack.NewDecoder(headerTableSize, nil)
	d.SetMaxStringLength(maxHeaderString)
	return d
}

func TestHuffmanDecodesEveryByte(t *testing.T) {
	for c := range 256 {
		s := string([]byte{byte(c)})
		for _, in := range []string{s, strings.Repeat(s, 7), "a" + s + "bc"} {
			got, err := huffmanDecode(hpack.AppendHuffmanString(nil, in))
			if err != nil || string(got) != in {
				t.Errorf("huffmanDecode(Huffman of %q) = %q, %v", in, got, err)
			}
		}
	}
}

func TestHuffmanRefusesWhatTheRFCRefuses(t *testing.T) {
	for _, c := range []struct {
		name string
		in   []byte
	}{
		{"EOS", []byte{0xff, 0xff, 0xff, 0xfc}},
		{"padding of 8 bits", append(hpack.AppendHuffmanString(nil, "0"), 0xff)},
		{"padding not all ones", []byte{0x00}}, // '0' (00000) then 000
	} {
		if got, err := huffmanDecode(c.in); err == nil {
			t.Errorf("%s: decoded %q", c.name, got)
		}
		if _, err := hpack.HuffmanDecodeToString(c.in); err == nil {
			t.Errorf("%s: x/net decodes it", c.name)
		}
	}
}

// TestDecoderAgreesWithXNet decodes what x/net's encoder writes, with
// the static table, Huffman coding, a dynamic table that evicts, and table
// size updates, block after block on one decoder of each.
func TestDecoderAgreesWithXNet(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	names := []string{":status", "content-type", "grpc-status", "grpc-message", "x-a", "x-long-" + strings.Repeat("n", 300), "set-cookie", "vary"}
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	ours, theirs := newHPACKDecoder(), newXNetDecoder()
	for block := range 300 {
		buf.Reset()
		if block%37 == 5 {
			enc.SetMaxDynamicTableSize(uint32(r.IntN(headerTableSize + 1)))
		}
		var want []headerField
		for range r.IntN(8) {
			f := headerField{names[r.IntN(len(names))], strings.Repeat(string(rune('a'+r.IntN(26))), r.IntN(200))}
			if r.IntN(4) == 0 {
				f.Value = string([]byte{byte(r.IntN(256)), byte(r.IntN(256))})
			}
			want = append(want, f)
			if err := enc.WriteField(hpack.HeaderField{Name: f.Name, Value: f.Value, Sensitive: r.IntN(5) == 0}); err != nil {
				t.Fatal(err)
			}
		}
		got, err := ours.decode(buf.Bytes())
		if err != nil {
			t.Fatalf("block %d: %v", block, err)
		}
		x, err := xnetDecode(t, theirs, buf.Bytes())
		if err != nil {
			t.Fatalf("block %d: x/net: %v", block, err)
		}
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(x, want) {
			t.Fatalf("block %d: got %q, x/net %q, want %q", block, got, x, want)
		}
	}
}

func TestStaticTable(t *testing.T) {
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	for _, f := range staticTable {
		buf.Reset()
		_ = enc.WriteField(hpack.HeaderField{Name: f.Name, Value: f.Value})
		if buf.Len() != 1 {
			t.Errorf("x/net writes %q in %d bytes, not as an index of its static table", f, buf.Len())
			continue
		}
		got, err := newHPACKDecoder().decode(buf.Bytes())
		if err != nil || len(got) != 1 || got[0] != f {
			t.Errorf("index %d: %q, %v; want %q", buf.Bytes()[0]&0x7f, got, err, f)
		}
	}
}

// TestEncoderWritesWhatXNetReads: the client's blocks, with the table
// size update it begins with once the server limited the table.
func TestEncoderWritesWhatXNetReads(t *testing.T) {
	fields := []headerField{{":method", "POST"}, {":path", "/sandboxd.v1.Sessions/Session"}, {"x", ""}, {"grpc-timeout", strings.Repeat("9", 200)}}
	for _, update := range []bool{false, true} {
		var b []byte
		if update {
			b = append(b, headerTableUpdate)
		}
		for _, f := range fields {
			b = appendHeaderField(b, f.Name, f.Value)
		}
		d := newXNetDecoder()
		d.SetAllowedMaxDynamicTableSize(0)
		got, err := xnetDecode(t, d, b)
		if err != nil || !reflect.DeepEqual(got, fields) {
			t.Errorf("update %v: x/net reads %q, %v", update, got, err)
		}
	}
}

func TestHeaderIntegers(t *testing.T) {
	for _, n := range []uint{4, 5, 6, 7} {
		for _, v := range []uint64{0, 1, 1<<n - 2, 1<<n - 1, 1 << n, 127 + 1<<n, 1 << 20, 1<<31 - 1} {
			b := appendHeaderInt(nil, n, 0, v)
			got, rest, err := readHeaderInt(n, b)
			if err != nil || got != v || len(rest) != 0 {
				t.Errorf("n=%d v=%d: %v read as %d, %v, rest %v", n, v, b, got, err, rest)
			}
		}
	}
}

// FuzzHPACKDecode: on any block, the client's decoder fails where x/net's
// does and reads the same fields where it does not, also on a second
// block after the first left its dynamic table. The corpus is in
// testdata/fuzz/FuzzHPACKDecode; run it with -fuzzminimizetime of a few
// seconds, or minimizing one input stalls it for a minute.
func FuzzHPACKDecode(f *testing.F) {
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	for _, hf := range []hpack.HeaderField{{Name: ":status", Value: "200"}, {Name: "content-type", Value: "application/grpc"}, {Name: "grpc-message", Value: "quota reached"}} {
		_ = enc.WriteField(hf)
	}
	f.Add(buf.Bytes(), []byte{0xbe})
	f.Add([]byte{0x3f, 0xe1, 0x1f}, []byte{0x20, 0x82})
	f.Add([]byte{0x40, 0x81, 0x1f, 0x81, 0xff}, []byte{})
	f.Fuzz(func(t *testing.T, a, b []byte) {
		ours, theirs := newHPACKDecoder(), newXNetDecoder()
		for _, block := range [][]byte{a, b} {
			got, err := ours.decode(block)
			want, xerr := xnetDecode(t, theirs, block)
			if (err == nil) != (xerr == nil) {
				t.Fatalf("%x: error %v, x/net's %v", block, err, xerr)
			}
			if err != nil {
				return
			}
			if len(got) != 0 || len(want) != 0 {
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("%x: %q, x/net %q", block, got, want)
				}
			}
		}
	})
}

// TestHeaderTableLimitIsAcknowledgedOnce: once the server limits the
// client's table below HTTP/2's starting size, the client's next header
// block begins with a table size update to 0, and no later one does.
func TestHeaderTableLimitIsAcknowledgedOnce(t *testing.T) {
	client, srv := net.Pipe()
	defer srv.Close()
	started := make(chan *Conn)
	go func() { started <- Start(client, Options{Window: 1 << 20}) }()
	if _, err := io.ReadFull(srv, make([]byte, len(clientPreface))); err != nil {
		t.Fatal(err)
	}
	settings := appendFrameHeader(nil, 6, frameSettings, 0, 0)
	settings = binary.BigEndian.AppendUint16(settings, settingHeaderTableSize)
	settings = binary.BigEndian.AppendUint32(settings, 0)
	go srv.Write(settings)
	fr := &frameReader{r: srv}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var c *Conn
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	call := func() {
		if c == nil {
			c = <-started
		}
		go c.Invoke(ctx, "/sandboxd.v1.Sandboxd/Inspect", &sandboxdv1.InspectRequest{}, &sandboxdv1.SessionInfo{})
	}
	var blocks [][]byte
	for len(blocks) < 2 {
		h, p, err := fr.next()
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case h.typ == frameSettings && h.flags&flagAck != 0:
			call()
		case h.typ == frameHeaders:
			blocks = append(blocks, append([]byte(nil), p...))
			if len(blocks) == 1 {
				call()
			}
		}
	}
	if blocks[0][0] != headerTableUpdate || blocks[1][0] == headerTableUpdate {
		t.Errorf("blocks begin %#x and %#x; want a table size update to 0 in the first only", blocks[0][0], blocks[1][0])
	}
	d := newXNetDecoder()
	d.SetAllowedMaxDynamicTableSize(0)
	for i, b := range blocks {
		if _, err := xnetDecode(t, d, b); err != nil {
			t.Errorf("block %d: x/net: %v", i, err)
		}
	}
}
