// Command probe is run inside sandboxes by the conformance suite. Each
// operation tries one thing a policy allows or forbids and prints one JSON
// line saying what happened, then the next operation runs. The probe exits 0
// whatever the outcomes, so the suite compares outcomes, not exit codes.
//
// Usage:
//
//	probe OP ARGS... [OP ARGS...]...
//
// Operations take a fixed number of arguments, except argc, which takes the
// rest of the command line.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strings"
	"time"
)

// Payload is what write and symlink-write put in files, so the suite can tell
// a write by the probe from the fixture's own content.
const Payload = "written by sandboxd conformance probe\n"

// ioTimeout bounds every network wait: a denied connection must show up as a
// failed step, not as a probe that never finishes.
const ioTimeout = 3 * time.Second

// Result is one line of output. Errno is the symbolic errno ("EACCES") when
// the operation failed with one.
type Result struct {
	Op     string `json:"op"`
	OK     bool   `json:"ok"`
	Errno  string `json:"errno,omitempty"`
	Detail any    `json:"detail,omitempty"`
}

type op struct {
	// args is the number of arguments; -1 takes all remaining ones.
	args int
	run  func(args []string) Result
}

func ops() map[string]op {
	m := map[string]op{
		"write":         {1, write},
		"read":          {1, read},
		"mkdir":         {1, mkdir},
		"rename":        {2, rename},
		"link":          {2, link},
		"remove":        {1, remove},
		"symlink-write": {2, symlinkWrite},
		"tcp-connect":   {1, tcpConnect},
		"udp-send":      {1, udpSend},
		"unix-connect":  {1, unixConnect},
		// unix-connect-only succeeds once connected, reading nothing: for
		// servers that wait for the client to speak first.
		"unix-connect-only": {1, unixConnectOnly},
		"loopback":          {0, loopback},
		"net-ifaces":        {0, netIfaces},
		"env":               {0, env},
		"stdin":             {0, stdinLine},
		"write-knob":        {1, writeKnob},
		"hold":              {1, hold},
		"spawn":             {1, spawn},
		"argc":              {-1, argc},
		// Through the daemon's allowlist proxy (network ALLOWLIST).
		"http-get":      {1, httpGet},
		"proxy-connect": {1, proxyConnect},
		"socks-connect": {1, socksConnect},
		"dns-lookup":    {1, dnsLookup},
		// Against limits.
		"mem-hog": {1, memHog},
		"spew":    {1, spew},
	}
	for name, o := range platformOps() {
		m[name] = o
	}
	return m
}

func main() {
	table := ops()
	args := os.Args[1:]
	if len(args) == 0 {
		usage(table)
	}
	out := json.NewEncoder(os.Stdout)
	for len(args) > 0 {
		name := args[0]
		o, ok := table[name]
		if !ok {
			fmt.Fprintf(os.Stderr, "probe: unknown operation %q\n", name)
			usage(table)
		}
		n := o.args
		if n < 0 {
			n = len(args) - 1
		}
		if len(args)-1 < n {
			fmt.Fprintf(os.Stderr, "probe: %s needs %d arguments\n", name, n)
			os.Exit(2)
		}
		r := o.run(args[1 : 1+n])
		r.Op = name
		if err := out.Encode(r); err != nil {
			os.Exit(2)
		}
		args = args[1+n:]
	}
}

func usage(table map[string]op) {
	names := make([]string, 0, len(table))
	for name := range table {
		names = append(names, name)
	}
	sort.Strings(names)
	fmt.Fprintf(os.Stderr, "usage: probe OP ARGS... [OP ARGS...]...\noperations: %s\n", strings.Join(names, " "))
	os.Exit(2)
}

// outcome turns err into a Result, naming its errno when there is one.
func outcome(err error, detail any) Result {
	if err == nil {
		return Result{OK: true, Detail: detail}
	}
	if detail == nil {
		detail = err.Error()
	}
	return Result{Errno: errnoOf(err), Detail: detail}
}

func errnoOf(err error) string {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return "ETIMEDOUT"
	}
	if name := errnoName(err); name != "" {
		return name
	}
	return "unknown"
}

func writeFile(path string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(Payload)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func write(args []string) Result {
	return outcome(writeFile(args[0]), nil)
}

func read(args []string) Result {
	fi, err := os.Stat(args[0])
	if err != nil {
		return outcome(err, nil)
	}
	if fi.IsDir() {
		entries, err := os.ReadDir(args[0])
		return outcome(err, fmt.Sprintf("%d entries", len(entries)))
	}
	data, err := os.ReadFile(args[0])
	if err != nil {
		return outcome(err, nil)
	}
	if len(data) > 256 {
		data = data[:256]
	}
	return outcome(nil, string(data))
}

func mkdir(args []string) Result {
	return outcome(os.Mkdir(args[0], 0o755), nil)
}

func rename(args []string) Result {
	return outcome(os.Rename(args[0], args[1]), nil)
}

func link(args []string) Result {
	return outcome(os.Link(args[0], args[1]), nil)
}

func remove(args []string) Result {
	return outcome(os.Remove(args[0]), nil)
}

// symlinkWrite plants LINK -> TARGET and writes through LINK, the way a
// sandboxed tool would try to reach a file outside its write roots.
func symlinkWrite(args []string) Result {
	link, target := args[0], args[1]
	serr := os.Symlink(target, link)
	err := writeFile(link)
	detail := "symlink created"
	if serr != nil {
		detail = "symlink: " + serr.Error()
	}
	if err != nil {
		detail += "; write: " + err.Error()
	}
	return outcome(err, detail)
}

// tcpConnect reports what the peer sent first: the suite's host listener
// sends a token, so a listener inside the sandbox cannot be mistaken for it.
func tcpConnect(args []string) Result {
	c, err := net.DialTimeout("tcp", args[0], ioTimeout)
	if err != nil {
		return outcome(err, nil)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(ioTimeout))
	buf, err := io.ReadAll(io.LimitReader(c, 256))
	return outcome(err, string(buf))
}

// udpSend needs a reply: UDP sends succeed whether or not anything is there,
// so only a round trip to the host's echo listener proves it is reachable.
func udpSend(args []string) Result {
	c, err := net.DialTimeout("udp", args[0], ioTimeout)
	if err != nil {
		return outcome(err, nil)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(ioTimeout))
	if _, err := c.Write([]byte("ping")); err != nil {
		return outcome(err, nil)
	}
	buf := make([]byte, 256)
	n, err := c.Read(buf)
	if err != nil {
		return outcome(err, nil)
	}
	return outcome(nil, string(buf[:n]))
}

// unixConnect reports what the peer sent first, like tcpConnect. A leading
// "@" names an abstract socket.
func unixConnect(args []string) Result {
	c, err := net.DialTimeout("unix", args[0], ioTimeout)
	if err != nil {
		return outcome(err, nil)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(ioTimeout))
	buf, _ := io.ReadAll(io.LimitReader(c, 256))
	return outcome(nil, string(buf))
}

func unixConnectOnly(args []string) Result {
	c, err := net.DialTimeout("unix", args[0], ioTimeout)
	if err != nil {
		return outcome(err, nil)
	}
	return outcome(c.Close(), nil)
}

// loopback listens and connects on 127.0.0.1 inside the sandbox: tools run
// local servers even when they may not reach the network.
func loopback([]string) Result {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return outcome(err, nil)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		_, _ = c.Write([]byte("loopback"))
		c.Close()
	}()
	return tcpConnect([]string{l.Addr().String()})
}

// netIfaces is ok when the loopback interface is up and no other interface
// is: the sandbox has a network of its own, with nothing of the host's in
// it. Interfaces that are down do not count: a new network namespace holds
// the kernel's fallback tunnel devices, down, on hosts that load their
// modules.
func netIfaces([]string) Result {
	ifaces, err := net.Interfaces()
	if err != nil {
		return outcome(err, nil)
	}
	var list []string
	loopback, others := false, false
	for _, i := range ifaces {
		list = append(list, i.Name+" "+i.Flags.String())
		switch {
		case i.Flags&net.FlagUp == 0:
		case i.Flags&net.FlagLoopback != 0:
			loopback = true
		default:
			others = true
		}
	}
	return Result{OK: loopback && !others, Detail: list}
}

func env([]string) Result {
	return outcome(nil, os.Environ())
}

func stdinLine([]string) Result {
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil && line == "" {
		return outcome(err, nil)
	}
	return outcome(nil, strings.TrimRight(line, "\r\n"))
}

// writeKnob opens a kernel setting for writing and writes back what it
// already holds, so a knob left writable is detected without changing it.
// Write-only knobs such as /proc/sysrq-trigger get an empty write: opening
// them for writing is already the escape.
func writeKnob(args []string) Result {
	path := args[0]
	old, rerr := os.ReadFile(path)
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return outcome(err, nil)
	}
	defer f.Close()
	if rerr != nil {
		old = nil
	}
	_, err = f.Write(old)
	return outcome(err, "opened for writing")
}

// hold prints a line and then blocks forever; marker is only there so the
// suite can find the process on the host by its command line.
func hold(args []string) Result {
	_ = json.NewEncoder(os.Stdout).Encode(Result{Op: "hold", OK: true, Detail: args[0]})
	for {
		time.Sleep(time.Hour)
	}
}

// spawn leaves a detached process behind (new session, stdio closed) that
// outlives the probe, to show that the sandbox does not let it survive.
func spawn(args []string) Result {
	self, err := os.Executable()
	if err != nil {
		return outcome(err, nil)
	}
	pid, err := startDetached(self, "hold", args[0])
	return outcome(err, pid)
}

func argc(args []string) Result {
	total := 0
	for _, a := range args {
		total += len(a)
	}
	return outcome(nil, fmt.Sprintf("%d args, %d bytes", len(args), total))
}
