package bench

import (
	"bufio"
	"io"
	"net"
	"slices"
	"strings"
)

// Many relays offer neither PIPELINING (RFC 2920) nor CHUNKING (RFC
// 3030), and a sender then waits for an answer to every command: the case
// where issue #48's profile found 40 % of the time in system calls.
// go-smtp's server always offers both, so a plain sink puts a proxy in
// front of a Sink that takes them out of the EHLO answer and passes
// everything else through unchanged.

// withoutExtensions are the EHLO keywords a plain sink does not offer.
var withoutExtensions = []string{"PIPELINING", "CHUNKING"}

// StartPlainSink is a Sink whose EHLO answer offers no PIPELINING and no
// CHUNKING. Its Addr is the proxy's; what it counts is the sink's.
func StartPlainSink() (*Sink, error) {
	s, err := StartSink()
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.Close()
		return nil, err
	}
	backend := s.Addr
	s.Addr = l.Addr().String()
	s.front = l
	go func() {
		for {
			client, err := l.Accept()
			if err != nil {
				return // the listener was closed by Close
			}
			go proxyPlain(client, backend)
		}
	}()
	return s, nil
}

// proxyPlain joins client to the sink at backend: the client's bytes as
// they are, the sink's answers with the extensions taken out.
func proxyPlain(client net.Conn, backend string) {
	defer func() { Warn("close a plain sink's client", client.Close()) }()
	server, err := net.Dial("tcp", backend)
	if err != nil {
		Warn("plain sink", err)
		return
	}
	defer func() { _ = server.Close() }() // closed when either side ends: an error here says nothing new
	go func() {
		_, _ = io.Copy(server, client) // ends when either side closes
		_ = server.Close()
	}()
	if err := filterReplies(client, server); err != nil && !isClosed(err) {
		Warn("plain sink", err)
	}
}

// filterReplies copies the server's replies to w, dropping the lines of
// a multiline 250 reply that offer withoutExtensions and marking the
// last line left as the reply's end.
func filterReplies(w io.Writer, server io.Reader) error {
	br := bufio.NewReader(server)
	var block []string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return err
		}
		switch {
		case strings.HasPrefix(line, "250-"):
			block = append(block, line)
			continue
		case len(block) > 0 && strings.HasPrefix(line, "250 "):
			line = endReply(offered(append(block, line)))
			block = nil
		}
		if _, err := io.WriteString(w, line); err != nil {
			return err
		}
	}
}

// offered is a multiline reply without the lines of withoutExtensions
// (the first line, the greeting, always stays).
func offered(lines []string) []string {
	out := lines[:1]
	for _, l := range lines[1:] {
		keyword := strings.ToUpper(strings.Fields(l[4:] + " ")[0])
		if !slices.Contains(withoutExtensions, keyword) {
			out = append(out, l)
		}
	}
	return out
}

// endReply joins lines into one reply, "250-" on every line but the
// last, which is "250 ".
func endReply(lines []string) string {
	var b strings.Builder
	for i, l := range lines {
		sep := "-"
		if i == len(lines)-1 {
			sep = " "
		}
		b.WriteString("250" + sep + l[4:])
	}
	return b.String()
}

func isClosed(err error) bool {
	return err == io.EOF || strings.Contains(err.Error(), "use of closed network connection") || strings.Contains(err.Error(), "connection reset")
}
