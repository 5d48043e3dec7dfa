// kumoss-egress-relay: the engine's only way out of its network namespace. It runs inside the
// sandbox (bubblewrap --unshare-net), where the loopback interface is all there is: it listens on
// the loopback addresses given (`-l 127.0.0.1:PORT=SOCKET`) — the run's own destinations on the
// worker's loopback (its state server, an emulator) and the egress proxy — and relays each
// connection to the Unix socket given, which the worker serves outside the namespace
// (activities/egress.ts) and where it decides what the connection may reach. Then it runs the
// command after `--` and exits as the command does. Standard library only.
package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
)

const version = "kumoss-egress-relay 0.1.0"

type mapping struct{ listen, socket string }

func usage(msg string) {
	fmt.Fprintf(os.Stderr, "kumoss-egress-relay: %s\nusage: kumoss-egress-relay [-l HOST:PORT=SOCKET]... -- COMMAND [ARG]...\n", msg)
	os.Exit(125)
}

func parse(args []string) ([]mapping, []string) {
	var maps []mapping
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "-version", "--version":
			fmt.Println(version)
			os.Exit(0)
		case "-l":
			if i+1 >= len(args) {
				usage("-l needs HOST:PORT=SOCKET")
			}
			l, s, ok := strings.Cut(args[i+1], "=")
			if !ok || l == "" || s == "" {
				usage("-l needs HOST:PORT=SOCKET, not " + args[i+1])
			}
			maps = append(maps, mapping{l, s})
			i++
		case "--":
			if i+1 >= len(args) {
				usage("no command after --")
			}
			return maps, args[i+1:]
		default:
			usage("unknown argument " + args[i])
		}
	}
	usage("no command (-- COMMAND)")
	return nil, nil
}

// relay copies both ways between a and b, closing each direction's write side when its reader ends.
func relay(a net.Conn, b net.Conn) {
	var wg sync.WaitGroup
	half := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		if c, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = c.CloseWrite()
		} else {
			_ = dst.Close()
		}
	}
	wg.Add(2)
	go half(a, b)
	go half(b, a)
	wg.Wait()
	_ = a.Close()
	_ = b.Close()
}

func serve(l net.Listener, socket string) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			u, err := net.Dial("unix", socket)
			if err != nil {
				fmt.Fprintf(os.Stderr, "kumoss-egress-relay: %s: the worker's side is gone: %v\n", l.Addr(), err)
				_ = c.Close()
				return
			}
			relay(c, u)
		}()
	}
}

func main() {
	maps, command := parse(os.Args[1:])
	for _, m := range maps {
		l, err := net.Listen("tcp", m.listen)
		if err != nil {
			fmt.Fprintf(os.Stderr, "kumoss-egress-relay: cannot listen on %s: %v\n", m.listen, err)
			os.Exit(125)
		}
		go serve(l, m.socket)
	}
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "kumoss-egress-relay: %v\n", err)
		os.Exit(127)
	}
	go func() {
		for s := range signals {
			_ = cmd.Process.Signal(s)
		}
	}()
	err := cmd.Wait()
	if err == nil {
		os.Exit(0)
	}
	if ee, ok := err.(*exec.ExitError); ok {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			os.Exit(128 + int(ws.Signal()))
		}
		os.Exit(ee.ExitCode())
	}
	fmt.Fprintf(os.Stderr, "kumoss-egress-relay: %v\n", err)
	os.Exit(125)
}
