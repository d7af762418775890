package conformance

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/sandboxd/sandboxd/api/client"
)

// TestSocketActivationAndReadiness runs the daemon as systemd would with
// deploy/sandboxd.socket and Type=notify: on a socket systemd made
// (systemd-socket-activate, which starts it on the first connection),
// telling NOTIFY_SOCKET it is ready once its self-test has passed, and
// answering grpc.health.v1 SERVING from then on.
func TestSocketActivationAndReadiness(t *testing.T) {
	activate, err := exec.LookPath("systemd-socket-activate")
	if err != nil {
		t.Fatalf("systemd-socket-activate (Debian's systemd package, which make deps installs): %v", err)
	}
	// Short: a unix socket path holds 107 bytes.
	dir, err := os.MkdirTemp("/tmp", "sbd-act-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	notify, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: filepath.Join(dir, "notify"), Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer notify.Close()
	sock := filepath.Join(dir, "sandboxd.sock")
	logPath := filepath.Join(dir, "log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	// systemd-socket-activate passes on only the variables -E names.
	cmd := exec.Command(activate, "-l", sock, "-E", "NOTIFY_SOCKET="+filepath.Join(dir, "notify"),
		suite.sandboxd, "--state-dir", filepath.Join(dir, "state"))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("systemd-socket-activate made no socket at %s", sock)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// The first connection starts the daemon on the passed socket.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, sock)
	if err != nil {
		b, _ := os.ReadFile(logPath)
		t.Fatalf("dial the activated daemon: %v\n%s", err, b)
	}
	c.Close()

	notify.SetReadDeadline(time.Now().Add(60 * time.Second))
	buf := make([]byte, 4096)
	n, err := notify.Read(buf)
	if err != nil {
		b, _ := os.ReadFile(logPath)
		t.Fatalf("no readiness notification: %v\n%s", err, b)
	}
	msg := string(buf[:n])
	if !strings.Contains(msg, "READY=1") || !strings.Contains(msg, "STATUS=self-test passed") {
		t.Errorf("readiness notification %q, want READY=1 and the passed self-test", msg)
	}

	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, service := range []string{"", "sandboxd.v1.Sandboxd"} {
		resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health of %q: %v, %v; want SERVING", service, resp.GetStatus(), err)
		}
	}
	if b, _ := os.ReadFile(logPath); !strings.Contains(string(b), "listening on "+sock+" (socket activation)") {
		t.Errorf("the daemon's log does not say it serves the passed socket:\n%s", b)
	}
}
