package netproxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Body of the answer to a request that is not addressed to a proxy.
const originFormBody = "this is a proxy: send absolute-form requests or CONNECT\n"

// DeniedHeader names the response header that carries "host:port reason"
// on HTTP refusals, for clients and people reading curl -v output.
const DeniedHeader = "X-Sandboxd-Denied"

// serveHTTP serves HTTP requests on c, one after the other, until the
// client or a response ends the connection or a request is a CONNECT.
func (s *Server) serveHTTP(c net.Conn, br *bufio.Reader, lim *headLimiter) {
	w := bufWriter{bufio.NewWriter(c)}
	for first := true; ; first = false {
		if !first {
			c.SetReadDeadline(time.Now().Add(s.cfg.HandshakeTimeout))
			// What br holds already is the start of this head.
			lim.limit(int64(MaxHeadBytes - br.Buffered()))
		}
		req, err := http.ReadRequest(br)
		if err != nil {
			switch {
			case lim.hit:
				writeText(w, http.StatusRequestHeaderFieldsTooLarge, "", fmt.Sprintf("request head larger than %d bytes\n", MaxHeadBytes))
				lingerClose(c)
			case errors.Is(err, io.EOF), errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, net.ErrClosed):
				// The client left, or never finished a head: nobody to answer.
			default:
				writeText(w, http.StatusBadRequest, "", fmt.Sprintf("malformed request: %v\n", err))
				lingerClose(c)
			}
			return
		}
		c.SetReadDeadline(time.Time{})
		lim.unlimit()
		if req.Method == http.MethodConnect {
			s.tunnelHTTP(c, br, w, req)
			return
		}
		if !s.forward(c, w, req) {
			return
		}
	}
}

// tunnelHTTP answers a CONNECT request and splices the tunnel.
func (s *Server) tunnelHTTP(c net.Conn, br *bufio.Reader, w bufWriter, req *http.Request) {
	var t target
	host, port, perr := net.SplitHostPort(req.URL.Host)
	if perr != nil {
		shown := printable(req.URL.Host)
		if shown == "" {
			shown = "(none)"
		}
		perr = &denied{target: shown, detail: "is not host:port", malformed: true}
	} else {
		t, perr = parseTarget(host, port)
	}
	up, err := s.open("connect", t, perr)
	if err != nil {
		writeRefusal(w, err)
		lingerClose(c)
		return
	}
	defer s.untrack(up)
	if _, err := io.WriteString(w, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	if err := w.Flush(); err != nil {
		return
	}
	splice(c, br, up)
}

// forward relays one absolute-form request to its origin and the response
// back. It reports whether the client connection can carry another
// request.
func (s *Server) forward(c net.Conn, w bufWriter, req *http.Request) bool {
	if req.URL.Host == "" {
		writeText(w, http.StatusBadRequest, "", originFormBody)
		lingerClose(c)
		return false
	}
	if req.URL.Scheme != "http" {
		writeText(w, http.StatusBadRequest, "", "only http:// URLs are forwarded; use CONNECT for https and anything else\n")
		lingerClose(c)
		return false
	}
	port := req.URL.Port()
	if port == "" {
		port = "80"
	}
	t, perr := parseTarget(req.URL.Hostname(), port)
	up, err := s.open("http", t, perr)
	if err != nil {
		writeRefusal(w, err)
		lingerClose(c)
		return false
	}
	defer s.untrack(up)

	header := req.Header.Clone()
	if header == nil {
		header = make(http.Header)
	}
	removeHopByHop(header, nil)
	if _, ok := header["User-Agent"]; !ok {
		// Present but empty keeps Request.Write from adding Go's own.
		header["User-Agent"] = []string{""}
	}
	upW := bufWriter{bufio.NewWriter(up)}
	var body *flushingBody
	out := &http.Request{
		Method: req.Method,
		URL: &url.URL{
			Path:       req.URL.Path,
			RawPath:    req.URL.RawPath,
			RawQuery:   req.URL.RawQuery,
			ForceQuery: req.URL.ForceQuery,
		},
		Proto:            "HTTP/1.1",
		ProtoMajor:       1,
		ProtoMinor:       1,
		Header:           header,
		Body:             http.NoBody,
		ContentLength:    req.ContentLength,
		TransferEncoding: req.TransferEncoding,
		Trailer:          req.Trailer,
		// The URL, not the client's Host header, says where the request
		// went (RFC 9112 section 3.2.2).
		Host: req.URL.Host,
		// Each request gets its own upstream connection, since the next
		// one may be for another host; the origin may as well know.
		Close: true,
	}
	if req.Body != nil && req.Body != http.NoBody {
		body = &flushingBody{r: req.Body, w: upW}
		out.Body = body
	}
	bodyRead := func() bool { return body == nil || body.eof.Load() }

	// The request is written while the response is read: an origin may
	// answer early (413, 100 Continue) and wait for nothing more.
	wrote := make(chan error, 1)
	go func() {
		err := out.Write(upW)
		if err == nil {
			err = upW.Flush()
		}
		if err != nil {
			up.Close()
		}
		wrote <- err
	}()

	resp, err := s.readResponse(up, out, w, req.ProtoAtLeast(1, 1))
	keep := false
	if err != nil {
		writeText(w, http.StatusBadGateway, "", fmt.Sprintf("sandboxd proxy: %s: %v\n", t, err))
	} else {
		keep = s.relayResponse(w, req, resp)
	}
	up.Close()
	if !keep || !bodyRead() {
		// The request body may be unread; nothing after it can be parsed
		// as the next request. Closing also frees the writer if it is
		// blocked reading that body.
		c.Close()
		keep = false
	}
	<-wrote
	return keep
}

// maxResponseHeadBytes bounds a response head from an origin, which may be
// hostile too: an allowed name is not a trusted server.
const maxResponseHeadBytes = 1 << 20

// readResponse reads the origin's final response, passing informational
// (1xx) ones to an HTTP/1.1 client on the way. The response's header has
// its hop-by-hop fields removed already.
func (s *Server) readResponse(up net.Conn, out *http.Request, w bufWriter, relay1xx bool) (*http.Response, error) {
	lim := &headLimiter{r: up}
	ur := bufio.NewReader(lim)
	for {
		pre, _ := ur.Peek(ur.Buffered())
		lim.limit(int64(maxResponseHeadBytes - len(pre)))
		// ReadResponse drops a Connection field that says close, and with
		// it the names of the other fields it lists, which must not be
		// passed on; they are read from a copy of the head.
		lim.record(pre)
		resp, err := http.ReadResponse(ur, out)
		listed := connectionTokens(lim.rec)
		hit := lim.hit
		lim.unlimit()
		if err != nil {
			if hit {
				return nil, fmt.Errorf("response head larger than %d bytes", maxResponseHeadBytes)
			}
			return nil, fmt.Errorf("reading response: %w", err)
		}
		removeHopByHop(resp.Header, listed)
		switch {
		case resp.StatusCode == http.StatusSwitchingProtocols:
			// Upgrade was stripped from the request; an origin switching
			// anyway would have us relay a protocol we cannot frame.
			return nil, errors.New("origin switched protocols though no upgrade was forwarded")
		case resp.StatusCode >= 200:
			return resp, nil
		case relay1xx:
			fmt.Fprintf(w, "HTTP/1.1 %s\r\n", resp.Status)
			resp.Header.Write(w)
			io.WriteString(w, "\r\n")
			if err := w.Flush(); err != nil {
				return nil, fmt.Errorf("relaying %s: %w", resp.Status, err)
			}
		}
	}
}

// connectionTokens returns the field names listed in the Connection fields
// of the message head at the start of raw.
func connectionTokens(raw []byte) []string {
	tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(raw)))
	if _, err := tp.ReadLine(); err != nil {
		return nil
	}
	h, _ := tp.ReadMIMEHeader()
	return listTokens(h["Connection"])
}

func listTokens(values []string) []string {
	var out []string
	for _, v := range values {
		for _, f := range strings.Split(v, ",") {
			if f = textproto.TrimString(f); f != "" {
				out = append(out, f)
			}
		}
	}
	return out
}

// relayResponse writes the origin's response to the client, streaming the
// body, and reports whether the connection can be kept.
func (s *Server) relayResponse(w bufWriter, req *http.Request, resp *http.Response) bool {
	// A proxy speaks its own HTTP version (RFC 9110 section 6.2); whether
	// the client connection stays open is the client's choice, not the
	// origin's, which only ever saw Connection: close.
	resp.Proto, resp.ProtoMajor, resp.ProtoMinor = "HTTP/1.1", 1, 1
	resp.Close = req.Close
	if !req.ProtoAtLeast(1, 1) && isChunked(resp.TransferEncoding) {
		// An HTTP/1.0 client cannot read chunks: delimit by closing.
		resp.TransferEncoding, resp.Trailer, resp.ContentLength = nil, nil, -1
		resp.Close = true
	}
	// Response.Write closes a connection whose body has no length; so do we.
	keep := !resp.Close && (resp.ContentLength >= 0 || isChunked(resp.TransferEncoding))
	if resp.Body != nil && resp.Body != http.NoBody {
		resp.Body = &flushingBody{r: resp.Body, w: w}
	}
	err := resp.Write(w)
	if err == nil {
		err = w.Flush()
	}
	return err == nil && keep
}

func isChunked(te []string) bool { return len(te) > 0 && te[0] == "chunked" }

// hopHeaders describe one connection, not the message, so a proxy must not
// pass them on (RFC 9110 section 7.6.1). Transfer-Encoding and Trailer
// are regenerated by net/http from the message's own framing.
var hopHeaders = []string{
	"Connection",
	"Proxy-Connection",
	"Keep-Alive",
	"Proxy-Authenticate",
	"Proxy-Authorization",
	"Te",
	"Trailer",
	"Transfer-Encoding",
	"Upgrade",
}

// removeHopByHop removes hopHeaders, the fields h's Connection field
// lists, and those named in listed.
func removeHopByHop(h http.Header, listed []string) {
	for _, f := range append(listTokens(h["Connection"]), listed...) {
		h.Del(f)
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
}

// writeRefusal answers a request the proxy could not or would not open.
func writeRefusal(w bufWriter, err error) {
	var d *denied
	var ue *upstreamError
	var ce *checkError
	switch {
	case errors.As(err, &ce):
		writeText(w, http.StatusServiceUnavailable, "", "sandboxd proxy: "+err.Error()+"\n")
	case errors.As(err, &d) && d.busy:
		writeText(w, http.StatusServiceUnavailable, d.Error(), d.Error()+" (sandboxd "+d.fieldName()+")\n", "Retry-After: 1")
	case errors.As(err, &d):
		status := http.StatusForbidden
		if d.malformed {
			status = http.StatusBadRequest
		}
		writeText(w, status, d.Error(), d.Error()+" (sandboxd "+d.fieldName()+")\n")
	case errors.As(err, &ue) && !ue.resolving && ue.timeout():
		writeText(w, http.StatusGatewayTimeout, "", "sandboxd proxy: "+ue.Error()+"\n")
	default:
		writeText(w, http.StatusBadGateway, "", "sandboxd proxy: "+err.Error()+"\n")
	}
}

// writeText writes a complete text/plain response after which the
// connection closes; denial, if not empty, goes in DeniedHeader, and each
// of extra is a further header line.
func writeText(w bufWriter, status int, denial, body string, extra ...string) error {
	fmt.Fprintf(w, "HTTP/1.1 %d %s\r\n", status, http.StatusText(status))
	io.WriteString(w, "Content-Type: text/plain; charset=utf-8\r\n")
	io.WriteString(w, "Content-Length: "+strconv.Itoa(len(body))+"\r\n")
	io.WriteString(w, "Connection: close\r\n")
	if denial != "" {
		io.WriteString(w, DeniedHeader+": "+denial+"\r\n")
	}
	for _, h := range extra {
		io.WriteString(w, h+"\r\n")
	}
	io.WriteString(w, "\r\n")
	io.WriteString(w, body)
	return w.Flush()
}

// bufWriter gathers the many small writes net/http makes for one message
// head into one segment. It hides bufio.Writer's ReadFrom on purpose:
// io.Copy would otherwise read a body straight into the buffer, and the
// Flush a flushingBody does before each read would corrupt it.
type bufWriter struct{ b *bufio.Writer }

func (w bufWriter) Write(p []byte) (int, error)       { return w.b.Write(p) }
func (w bufWriter) WriteByte(c byte) error            { return w.b.WriteByte(c) }
func (w bufWriter) WriteString(s string) (int, error) { return w.b.WriteString(s) }
func (w bufWriter) Flush() error                      { return w.b.Flush() }

// flushingBody flushes w before every read of the body it relays, so that
// whatever was written is on the wire before the proxy waits on the sender
// again: buffering never holds back a streamed response, nor a request
// head whose sender waits for 100 Continue before sending the body.
type flushingBody struct {
	r   io.Reader
	w   bufWriter
	eof atomic.Bool // the body was read to its end
}

func (b *flushingBody) Read(p []byte) (int, error) {
	if err := b.w.Flush(); err != nil {
		return 0, err
	}
	n, err := b.r.Read(p)
	if err == io.EOF {
		b.eof.Store(true)
	}
	return n, err
}

// Close does not close the underlying body: closing a server-side request
// body reads it to its end, which could block on the client; the caller
// decides the connection's fate from eof instead.
func (b *flushingBody) Close() error { return nil }
