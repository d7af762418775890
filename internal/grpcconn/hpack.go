package grpcconn

import (
	"errors"
	"fmt"
)

// HPACK (RFC 7541), as much of it as a client of one server needs. It
// is the client's own rather than golang.org/x/net/http2/hpack's, whose
// initialiser builds maps of the static table at every start of every
// program linking it, and whose first Huffman-coded string, which the
// server's first reply brings, builds a decoding tree of many 2 KiB
// nodes: 6 and 11 page faults, and the CPU, of a sandboxctl run. Here the
// tables are constant data and Huffman codes are decoded canonically.
//
// Header blocks are written as literals without indexing and without
// Huffman coding, so that the server's decoder table for them stays
// empty; the server's blocks are read in full, its dynamic table kept.

// headerField is one header or trailer as the server sent it.
type headerField struct {
	Name, Value string
}

// maxHeaderString bounds a name or value the server may send.
const maxHeaderString = 1 << 20

// maxHeaderList bounds the fields one header block decodes to, counted as
// SETTINGS_MAX_HEADER_LIST_SIZE counts them (name, value and 32 bytes
// each): a one-byte index names a dynamic table entry of up to 4 KiB, so
// a block within maxHeaderBlock could otherwise decode to gigabytes. The
// daemon's largest, a refusal's trailers with its Unenforceable detail,
// are a few KiB.
const maxHeaderList = 1 << 20

// headerTableSize is the decoder's table size, HTTP/2's default for
// SETTINGS_HEADER_TABLE_SIZE, which the client does not change.
const headerTableSize = 4096

var errHeaderTruncated = errors.New("hpack: truncated header block")

// appendHeaderField appends name and value as a literal header field
// without indexing, with a new name (RFC 7541, 6.2.2).
func appendHeaderField(b []byte, name, value string) []byte {
	b = append(b, 0)
	b = appendHeaderString(b, name)
	return appendHeaderString(b, value)
}

func appendHeaderString(b []byte, s string) []byte {
	b = appendHeaderInt(b, 7, 0, uint64(len(s)))
	return append(b, s...)
}

// appendHeaderInt appends v as an integer with an n-bit prefix (RFC
// 7541, 5.1), the byte's other bits being first's.
func appendHeaderInt(b []byte, n uint, first byte, v uint64) []byte {
	limit := uint64(1)<<n - 1
	if v < limit {
		return append(b, first|byte(v))
	}
	b = append(b, first|byte(limit))
	for v -= limit; v >= 0x80; v >>= 7 {
		b = append(b, byte(v)|0x80)
	}
	return append(b, byte(v))
}

// headerTableUpdate is a dynamic table size update to 0 (RFC 7541, 6.3),
// which a header block begins with once the server has limited the
// client's table below the size HTTP/2 starts with: the client's table
// stays empty, and 0 is within any limit.
const headerTableUpdate = 0x20

// hpackDecoder decodes the server's header blocks, in the order they came,
// keeping the dynamic table they build.
type hpackDecoder struct {
	// table holds the dynamic table's entries, the newest last.
	table   []headerField
	size    int
	maxSize int
}

func newHPACKDecoder() *hpackDecoder {
	return &hpackDecoder{maxSize: headerTableSize}
}

// decode decodes one whole header block.
func (d *hpackDecoder) decode(block []byte) ([]headerField, error) {
	var fields []headerField
	listSize := 0
	emit := func(f headerField) error {
		if listSize += entrySize(f); listSize > maxHeaderList {
			return fmt.Errorf("hpack: header list of more than %d bytes", maxHeaderList)
		}
		fields = append(fields, f)
		return nil
	}
	for first := true; len(block) > 0; first = false {
		b := block[0]
		switch {
		case b&0x80 != 0: // indexed (6.1)
			i, rest, err := readHeaderInt(7, block)
			if err != nil {
				return nil, err
			}
			f, err := d.at(i)
			if err != nil {
				return nil, err
			}
			if err := emit(f); err != nil {
				return nil, err
			}
			block = rest
		case b&0xe0 == 0x20: // dynamic table size update (6.3)
			if !first && d.size > 0 {
				return nil, errors.New("hpack: dynamic table size update after the start of a header block")
			}
			size, rest, err := readHeaderInt(5, block)
			if err != nil {
				return nil, err
			}
			if size > headerTableSize {
				return nil, fmt.Errorf("hpack: dynamic table size update to %d, above %d", size, headerTableSize)
			}
			d.maxSize = int(size)
			d.evict(0)
			block = rest
		default: // literal with (6.2.1), without (6.2.2) or never (6.2.3) indexing
			prefix := uint(4)
			if b&0xc0 == 0x40 {
				prefix = 6
			}
			f, rest, err := d.literal(prefix, block)
			if err != nil {
				return nil, err
			}
			if prefix == 6 {
				d.add(f)
			}
			if err := emit(f); err != nil {
				return nil, err
			}
			block = rest
		}
	}
	return fields, nil
}

func (d *hpackDecoder) literal(prefix uint, block []byte) (headerField, []byte, error) {
	var f headerField
	i, rest, err := readHeaderInt(prefix, block)
	if err != nil {
		return f, nil, err
	}
	if i > 0 {
		named, err := d.at(i)
		if err != nil {
			return f, nil, err
		}
		f.Name = named.Name
	} else if f.Name, rest, err = readHeaderString(rest); err != nil {
		return f, nil, err
	}
	f.Value, rest, err = readHeaderString(rest)
	return f, rest, err
}

// at is the field at index i of the static and dynamic tables (2.3.3).
func (d *hpackDecoder) at(i uint64) (headerField, error) {
	switch {
	case i == 0 || i > uint64(len(staticTable)+len(d.table)):
		return headerField{}, fmt.Errorf("hpack: invalid index %d", i)
	case i <= uint64(len(staticTable)):
		return staticTable[i-1], nil
	}
	return d.table[len(d.table)-int(i-uint64(len(staticTable)))], nil
}

func entrySize(f headerField) int { return len(f.Name) + len(f.Value) + 32 }

// add puts f in the dynamic table, evicting the oldest entries to make
// room; an entry larger than the table empties it and is not kept (4.4).
func (d *hpackDecoder) add(f headerField) {
	n := entrySize(f)
	if n > d.maxSize {
		d.evict(d.maxSize)
		return
	}
	d.evict(n)
	d.table = append(d.table, f)
	d.size += n
}

// evict drops the oldest entries until room bytes fit in the table.
func (d *hpackDecoder) evict(room int) {
	drop := 0
	for d.size+room > d.maxSize && drop < len(d.table) {
		d.size -= entrySize(d.table[drop])
		drop++
	}
	d.table = d.table[drop:]
}

// readHeaderInt reads an integer with an n-bit prefix (5.1).
func readHeaderInt(n uint, b []byte) (uint64, []byte, error) {
	if len(b) == 0 {
		return 0, nil, errHeaderTruncated
	}
	limit := uint64(1)<<n - 1
	v := uint64(b[0]) & limit
	if v < limit {
		return v, b[1:], nil
	}
	for i, shift := 1, uint(0); i < len(b); i++ {
		v += uint64(b[i]&0x7f) << shift
		if b[i]&0x80 == 0 {
			return v, b[i+1:], nil
		}
		if shift += 7; shift >= 63 {
			return 0, nil, errors.New("hpack: integer too large")
		}
	}
	return 0, nil, errHeaderTruncated
}

// readHeaderString reads a string literal (5.2), Huffman-coded or not.
func readHeaderString(b []byte) (string, []byte, error) {
	if len(b) == 0 {
		return "", nil, errHeaderTruncated
	}
	huffman := b[0]&0x80 != 0
	n, rest, err := readHeaderInt(7, b)
	if err != nil {
		return "", nil, err
	}
	if n > maxHeaderString {
		return "", nil, fmt.Errorf("hpack: string of %d bytes, above %d", n, maxHeaderString)
	}
	if uint64(len(rest)) < n {
		return "", nil, errHeaderTruncated
	}
	s, rest := rest[:n], rest[n:]
	if !huffman {
		return string(s), rest, nil
	}
	decoded, err := huffmanDecode(s)
	if err != nil {
		return "", nil, err
	}
	if len(decoded) > maxHeaderString {
		return "", nil, fmt.Errorf("hpack: string of %d bytes, above %d", len(decoded), maxHeaderString)
	}
	return string(decoded), rest, nil
}

// huffmanDecode decodes s with the canonical Huffman code of RFC 7541's
// Appendix B: codes of one length are consecutive, in the order of their
// symbols, after the last code one bit shorter shifted left by one bit.
func huffmanDecode(s []byte) ([]byte, error) {
	out := make([]byte, 0, len(s)*8/5)
	code, length, ones := uint32(0), 0, true
	for _, c := range s {
		for bit := 7; bit >= 0; bit-- {
			b := uint32(c>>bit) & 1
			code, length, ones = code<<1|b, length+1, ones && b == 1
			if length > 30 {
				return nil, errors.New("hpack: invalid Huffman code")
			}
			first := huffmanFirst[length]
			if code >= first && code-first < uint32(huffmanCount[length]) {
				sym := huffmanSymbols[int(huffmanAt[length])+int(code-first)]
				if sym == 256 {
					return nil, errors.New("hpack: EOS in a Huffman-coded string")
				}
				out = append(out, byte(sym))
				code, length, ones = 0, 0, true
			}
		}
	}
	// What is left is padding: fewer than 8 bits, all ones (EOS's first).
	if length > 7 || !ones {
		return nil, errors.New("hpack: invalid Huffman padding")
	}
	return out, nil
}

// huffmanCount is how many codes have each length, in bits.
var huffmanCount = [31]uint16{0, 0, 0, 0, 0, 10, 26, 32, 6, 0, 5, 3, 2, 6, 2, 3, 0, 0, 0, 3, 8, 13, 26, 29, 12, 4, 15, 19, 29, 0, 4}

// huffmanFirst is the first code of each length, and huffmanAt the place
// of its symbol in huffmanSymbols.
var (
	huffmanFirst = [31]uint32{0, 0, 0, 0, 0, 0, 20, 92, 248, 508, 1016, 2042, 4090, 8184, 16380, 32764, 65534, 131068, 262136, 524272, 1048550, 2097116, 4194258, 8388568, 16777194, 33554412, 67108832, 134217694, 268435426, 536870910, 1073741820}
	huffmanAt    = [31]uint16{0, 0, 0, 0, 0, 0, 10, 36, 68, 74, 74, 79, 82, 84, 90, 92, 95, 95, 95, 95, 98, 106, 119, 145, 174, 186, 190, 205, 224, 253, 253}
)

// huffmanSymbols are the symbols (256 is EOS) in the order of their codes.
var huffmanSymbols = [257]uint16{48, 49, 50, 97, 99, 101, 105, 111, 115, 116, 32, 37, 45, 46, 47, 51,
	52, 53, 54, 55, 56, 57, 61, 65, 95, 98, 100, 102, 103, 104, 108, 109,
	110, 112, 114, 117, 58, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76,
	77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 89, 106, 107, 113, 118,
	119, 120, 121, 122, 38, 42, 44, 59, 88, 90, 33, 34, 40, 41, 63, 39,
	43, 124, 35, 62, 0, 36, 64, 91, 93, 126, 94, 125, 60, 96, 123, 92,
	195, 208, 128, 130, 131, 162, 184, 194, 224, 226, 153, 161, 167, 172, 176, 177,
	179, 209, 216, 217, 227, 229, 230, 129, 132, 133, 134, 136, 146, 154, 156, 160,
	163, 164, 169, 170, 173, 178, 181, 185, 186, 187, 189, 190, 196, 198, 228, 232,
	233, 1, 135, 137, 138, 139, 140, 141, 143, 147, 149, 150, 151, 152, 155, 157,
	158, 165, 166, 168, 174, 175, 180, 182, 183, 188, 191, 197, 231, 239, 9, 142,
	144, 145, 148, 159, 171, 206, 215, 225, 236, 237, 199, 207, 234, 235, 192, 193,
	200, 201, 202, 205, 210, 213, 218, 219, 238, 240, 242, 243, 255, 203, 204, 211,
	212, 214, 221, 222, 223, 241, 244, 245, 246, 247, 248, 250, 251, 252, 253, 254,
	2, 3, 4, 5, 6, 7, 8, 11, 12, 14, 15, 16, 17, 18, 19, 20,
	21, 23, 24, 25, 26, 27, 28, 29, 30, 31, 127, 220, 249, 10, 13, 22,
	256,
}

// staticTable is RFC 7541's Appendix A.
var staticTable = [...]headerField{
	{":authority", ""},
	{":method", "GET"},
	{":method", "POST"},
	{":path", "/"},
	{":path", "/index.html"},
	{":scheme", "http"},
	{":scheme", "https"},
	{":status", "200"},
	{":status", "204"},
	{":status", "206"},
	{":status", "304"},
	{":status", "400"},
	{":status", "404"},
	{":status", "500"},
	{"accept-charset", ""},
	{"accept-encoding", "gzip, deflate"},
	{"accept-language", ""},
	{"accept-ranges", ""},
	{"accept", ""},
	{"access-control-allow-origin", ""},
	{"age", ""},
	{"allow", ""},
	{"authorization", ""},
	{"cache-control", ""},
	{"content-disposition", ""},
	{"content-encoding", ""},
	{"content-language", ""},
	{"content-length", ""},
	{"content-location", ""},
	{"content-range", ""},
	{"content-type", ""},
	{"cookie", ""},
	{"date", ""},
	{"etag", ""},
	{"expect", ""},
	{"expires", ""},
	{"from", ""},
	{"host", ""},
	{"if-match", ""},
	{"if-modified-since", ""},
	{"if-none-match", ""},
	{"if-range", ""},
	{"if-unmodified-since", ""},
	{"last-modified", ""},
	{"link", ""},
	{"location", ""},
	{"max-forwards", ""},
	{"proxy-authenticate", ""},
	{"proxy-authorization", ""},
	{"range", ""},
	{"referer", ""},
	{"refresh", ""},
	{"retry-after", ""},
	{"server", ""},
	{"set-cookie", ""},
	{"strict-transport-security", ""},
	{"transfer-encoding", ""},
	{"user-agent", ""},
	{"vary", ""},
	{"via", ""},
	{"www-authenticate", ""},
}
