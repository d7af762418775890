//go:build linux

package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/mem"
)

// countingPool counts the buffers taken from it and given back.
type countingPool struct{ got, put atomic.Int32 }

func (p *countingPool) Get(n int) *[]byte {
	p.got.Add(1)
	b := make([]byte, n)
	return &b
}

func (p *countingPool) Put(*[]byte) { p.put.Add(1) }

// readOnReady is grpc's optional read interface for a connection.
type readOnReady interface {
	ReadOnReady(bufSize int, pool mem.BufferPool) (*[]byte, int, error)
}

// An admitted connection reads as grpc reads a bare unix socket: no buffer
// is held while the read waits, one is as the bytes come, and the end is
// io.EOF with every buffer given back.
// So does one on a session's socket.
func TestAdmittedConnTakesABufferOnlyForData(t *testing.T) {
	for _, session := range []string{"", "s1"} {
		t.Run("session="+session, func(t *testing.T) { testReadsOnReady(t, session) })
	}
}

func testReadsOnReady(t *testing.T, session string) {
	lis, err := net.Listen("unix", filepath.Join(t.TempDir(), "r.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	var l net.Listener = lis
	if session != "" {
		l = scopedListener{Listener: lis, session: session}
	}
	client, err := net.Dial("unix", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	raw, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	released := false
	conn, _, err := Credentials{Admit: func(Caller) (func(), error) { return func() { released = true }, nil }}.ServerHandshake(raw)
	if err != nil {
		t.Fatal(err)
	}
	rr, ok := conn.(readOnReady)
	if !ok {
		t.Fatalf("%T has no ReadOnReady: grpc keeps a 32 KiB buffer for each such connection", conn)
	}
	pool := &countingPool{}
	type read struct {
		buf *[]byte
		n   int
		err error
	}
	got := make(chan read, 1)
	go func() {
		buf, n, err := rr.ReadOnReady(64, pool)
		got <- read{buf, n, err}
	}()
	time.Sleep(50 * time.Millisecond)
	if held := pool.got.Load() - pool.put.Load(); held != 0 {
		t.Fatalf("%d buffers held while the read waits for data", held)
	}
	if _, err := client.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if r.err != nil {
		t.Fatalf("ReadOnReady: %v", r.err)
	}
	if string((*r.buf)[:r.n]) != "hello" {
		t.Fatalf("ReadOnReady = %q; want hello", (*r.buf)[:r.n])
	}
	pool.Put(r.buf)
	client.Close()
	if _, _, err := rr.ReadOnReady(64, pool); !errors.Is(err, io.EOF) {
		t.Fatalf("ReadOnReady after the peer closed: %v, want io.EOF", err)
	}
	if g, p := pool.got.Load(), pool.put.Load(); g != p {
		t.Errorf("%d buffers taken, %d given back", g, p)
	}
	conn.Close()
	if !released {
		t.Error("closing the connection did not give the caller's place back")
	}
}

// countingReads is an admitted connection whose reads are counted: what
// grpc calls on it.
type countingReads struct {
	*readingConn
	onReady, plain atomic.Int32
}

func (c *countingReads) ReadOnReady(bufSize int, pool mem.BufferPool) (*[]byte, int, error) {
	c.onReady.Add(1)
	return c.readingConn.ReadOnReady(bufSize, pool)
}

func (c *countingReads) Read(b []byte) (int, error) {
	c.plain.Add(1)
	return c.readingConn.Read(b)
}

// countingCreds hands grpc the admitted connection wrapped to count reads.
type countingCreds struct {
	Credentials
	conns chan *countingReads
}

func (c countingCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.Credentials.ServerHandshake(conn)
	if err != nil {
		return nil, nil, err
	}
	rc, ok := conn.(*readingConn)
	if !ok {
		return nil, nil, fmt.Errorf("admitted connection is a %T", conn)
	}
	counted := &countingReads{readingConn: rc}
	c.conns <- counted
	return counted, info, nil
}

// grpc's server reads an admitted connection through ReadOnReady, which
// its transport looks for by an interface of its own internal package: a
// grpc that stopped looking for it would give every connection its own
// read buffer again, with no other test failing.
func TestGrpcReadsAnAdmittedConnOnReady(t *testing.T) {
	lis, err := net.Listen("unix", filepath.Join(t.TempDir(), "g.sock"))
	if err != nil {
		t.Fatal(err)
	}
	creds := countingCreds{
		Credentials: Credentials{Admit: func(Caller) (func(), error) { return func() {}, nil }},
		conns:       make(chan *countingReads, 1),
	}
	srv := grpc.NewServer(grpc.Creds(creds))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(lis)
	defer srv.Stop()
	cc, err := grpc.NewClient("unix://"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	c := <-creds.conns
	// The client's preface may be read plainly, before grpc's reader
	// starts; the frames after it are read on ready.
	if c.onReady.Load() == 0 {
		t.Errorf("grpc never called ReadOnReady (%d plain reads)", c.plain.Load())
	}
}
