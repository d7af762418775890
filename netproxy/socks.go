package netproxy

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"time"
)

// SOCKS5 protocol values (RFC 1928).
const (
	socksVersion = 0x05

	socksNoAuth       = 0x00
	socksNoAcceptable = 0xff

	socksCmdConnect = 0x01

	socksAtypIPv4   = 0x01
	socksAtypDomain = 0x03
	socksAtypIPv6   = 0x04

	socksSucceeded        = 0x00
	socksFailure          = 0x01
	socksNotAllowed       = 0x02
	socksNetUnreachable   = 0x03
	socksHostUnreachable  = 0x04
	socksConnRefused      = 0x05
	socksCmdNotSupported  = 0x07
	socksAtypNotSupported = 0x08
)

// serveSOCKS serves a SOCKS5 client whose first byte br has peeked.
func (s *Server) serveSOCKS(c net.Conn, br *bufio.Reader) {
	var hdr [2]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(br, methods); err != nil {
		return
	}
	if !slices.Contains(methods, socksNoAuth) {
		// Credentials would be meaningless: the sandbox, not a user, is
		// the client, and the policy is its only authorization.
		c.Write([]byte{socksVersion, socksNoAcceptable})
		return
	}
	if _, err := c.Write([]byte{socksVersion, socksNoAuth}); err != nil {
		return
	}

	var req [4]byte // VER CMD RSV ATYP
	if _, err := io.ReadFull(br, req[:]); err != nil || req[0] != socksVersion {
		return
	}
	var host string
	switch req[3] {
	case socksAtypIPv4, socksAtypIPv6:
		b := make([]byte, 4)
		if req[3] == socksAtypIPv6 {
			b = make([]byte, 16)
		}
		if _, err := io.ReadFull(br, b); err != nil {
			return
		}
		a, _ := netip.AddrFromSlice(b)
		host = a.String()
	case socksAtypDomain:
		n, err := br.ReadByte()
		if err != nil {
			return
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(br, b); err != nil {
			return
		}
		host = string(b)
	default:
		socksReplyTo(c, socksAtypNotSupported)
		return
	}
	var port [2]byte
	if _, err := io.ReadFull(br, port[:]); err != nil {
		return
	}
	c.SetReadDeadline(time.Time{})
	if req[1] != socksCmdConnect {
		// BIND and UDP ASSOCIATE would open paths the policy cannot see
		// by host name.
		socksReplyTo(c, socksCmdNotSupported)
		return
	}

	t, perr := parseTarget(host, strconv.Itoa(int(binary.BigEndian.Uint16(port[:]))))
	up, err := s.open("connect", t, perr)
	if err != nil {
		socksReplyTo(c, socksReply(err))
		return
	}
	defer s.untrack(up)
	if err := socksReplyTo(c, socksSucceeded); err != nil {
		return
	}
	splice(c, br, up)
}

// socksReplyTo sends a reply with code. The bound address is always
// 0.0.0.0:0: a CONNECT client has no use for it, and the daemon's address
// on the host is none of the sandbox's business.
func socksReplyTo(c net.Conn, code byte) error {
	_, err := c.Write([]byte{socksVersion, code, 0x00, socksAtypIPv4, 0, 0, 0, 0, 0, 0})
	return err
}
