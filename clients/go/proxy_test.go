package llmclient_test

import (
	"context"
	"encoding/binary"
	"net"
	"sync"
	"testing"

	"google.golang.org/grpc/metadata"
)

// tcpProxy is a loopback TCP proxy the tests cut, to break a live gRPC stream for real (as
// tests/e2e/tcp_proxy.py). cut closes the client side of every open connection; the server side stays
// open and unread until close, so the server sees no disconnect. Acting on the HTTP/2 frames the
// server sends back, so a break lands at the same point however fast either side runs: cutAfterData(n)
// cuts the next connection once n DATA frames went through; with hold set, new connections pass the
// server's set-up back but nothing from the first response HEADERS frame on.
type tcpProxy struct {
	listener net.Listener
	upstream string
	mu       sync.Mutex
	clients  []net.Conn
	all      []net.Conn
	holding  bool
	cutAfter int // 0: none
	accepted int
}

func startProxy(t *testing.T, upstream string) *tcpProxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{listener: l, upstream: upstream}
	go p.acceptLoop()
	t.Cleanup(p.close)
	return p
}

func (p *tcpProxy) addr() string { return p.listener.Addr().String() }

func (p *tcpProxy) hold(on bool) { p.mu.Lock(); p.holding = on; p.mu.Unlock() }

func (p *tcpProxy) cutAfterData(frames int) { p.mu.Lock(); p.cutAfter = frames; p.mu.Unlock() }

func (p *tcpProxy) acceptedCount() int { p.mu.Lock(); defer p.mu.Unlock(); return p.accepted }

func (p *tcpProxy) cut() int {
	p.mu.Lock()
	clients := p.clients
	p.clients = nil
	p.mu.Unlock()
	for _, c := range clients {
		c.Close()
	}
	return len(clients)
}

func (p *tcpProxy) close() {
	p.listener.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.all {
		c.Close()
	}
}

func (p *tcpProxy) acceptLoop() {
	for {
		client, err := p.listener.Accept()
		if err != nil {
			return
		}
		upstream, err := net.Dial("tcp", p.upstream)
		if err != nil {
			client.Close()
			continue
		}
		p.mu.Lock()
		p.accepted++
		p.clients = append(p.clients, client)
		p.all = append(p.all, client, upstream)
		holding, cutAfter := p.holding, p.cutAfter
		p.cutAfter = 0
		p.mu.Unlock()
		go pump(client, upstream, false, 0, nil) // an end of the client side is never passed on
		go pump(upstream, client, holding, cutAfter, p.forget)
	}
}

func (p *tcpProxy) forget(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, x := range p.clients {
		if x == c {
			p.clients = append(p.clients[:i], p.clients[i+1:]...)
			return
		}
	}
}

// pump copies src to dst; with untilHeaders or cutAfter > 0 it copies whole frames and stops at the
// first HEADERS frame, or cuts dst after cutAfter DATA frames.
func pump(src, dst net.Conn, untilHeaders bool, cutAfter int, forget func(net.Conn)) {
	framed := untilHeaders || cutAfter > 0
	dataFrames := 0
	buf := make([]byte, 65536)
	var pending []byte
	for {
		n, err := src.Read(buf)
		if err != nil {
			return
		}
		if !framed {
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
			continue
		}
		pending = append(pending, buf[:n]...)
		for len(pending) >= 9 {
			length := int(binary.BigEndian.Uint32(append([]byte{0}, pending[:3]...)))
			if len(pending) < 9+length {
				break
			}
			if cutAfter == 0 && pending[3] == 1 { // a HEADERS frame: hold from here on
				return // stop reading: the upstream side stays open, unread
			}
			if _, err := dst.Write(pending[:9+length]); err != nil {
				return
			}
			if pending[3] == 0 && length > 0 {
				dataFrames++
			}
			pending = pending[9+length:]
			if cutAfter > 0 && dataFrames == cutAfter {
				forget(dst)
				dst.Close()
				return
			}
		}
	}
}

func metadataCtx(key string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+key)
}
