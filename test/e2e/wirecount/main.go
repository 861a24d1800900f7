// Command wirecount is a TCP relay that counts the bytes it carries, for
// test/e2e/load.sh: the health checks of a storm talk to slurmrestd through
// it, so the REST traffic per failing node is measured on the wire (HTTP
// headers and bodies, both ways) rather than estimated.
//
//	wirecount -listen 127.0.0.1:18831 -to 127.0.0.1:18830
//
// On SIGTERM or SIGINT it prints one JSON line, {"conns":…,"sent":…,
// "received":…} (sent: client to server), and exits.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
)

type counts struct {
	conns, sent, received atomic.Int64
}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	to := flag.String("to", "", "address to relay to (host:port)")
	flag.Parse()
	if *to == "" {
		fmt.Fprintln(os.Stderr, "wirecount: -to is required")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var c counts
	if err := serve(ctx, *listen, *to, &c); err != nil {
		fmt.Fprintln(os.Stderr, "wirecount:", err)
		os.Exit(1)
	}
	out, _ := json.Marshal(map[string]int64{"conns": c.conns.Load(), "sent": c.sent.Load(), "received": c.received.Load()})
	fmt.Println(string(out))
}

// serve relays every connection to to until ctx ends, then waits for the
// open ones to finish.
func serve(ctx context.Context, listen, to string, c *counts) error {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	go func() { <-ctx.Done(); ln.Close() }()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		in, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("accept: %w", err)
		}
		c.conns.Add(1)
		wg.Go(func() { relay(ctx, in, to, c) })
	}
}

func relay(ctx context.Context, in net.Conn, to string, c *counts) {
	defer in.Close()
	out, err := (&net.Dialer{}).DialContext(ctx, "tcp", to)
	if err != nil {
		return
	}
	defer out.Close()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn, n *atomic.Int64) {
		k, _ := io.Copy(dst, src)
		n.Add(k)
		if tc, ok := dst.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(out, in, &c.sent)
	go pipe(in, out, &c.received)
	<-done
	<-done
}
