package intake

import (
	"net"
	"sync"
	"time"
)

// Session limits. A sending MTA hands over a report in seconds and retries
// later on a 421, so tight limits lose nothing: they only stop a stranger
// from holding the port with idle sessions (NOOP would keep one alive for
// ever, since go-smtp's ReadTimeout counts per command).
const (
	// DefaultMaxSessions bounds the sessions open at once.
	DefaultMaxSessions = 100
	// DefaultMaxSessionsPerClient bounds those from one IP address, so
	// one client cannot take all of them.
	DefaultMaxSessionsPerClient = 10
	// DefaultIdleTimeout ends a session with no MAIL, RCPT or DATA for
	// this long (NOOP, RSET, HELP and VRFY do not count).
	DefaultIdleTimeout = 30 * time.Second
	// DefaultSessionTimeout ends any session this long after it opened.
	DefaultSessionTimeout = 5 * time.Minute
)

// busyReply is what a connection over a cap gets before it is closed: a
// temporary failure, so the sender keeps its report and tries again.
const busyReply = "421 4.7.0 Too many sessions, try again later\r\n"

// sessionListener hands out at most max connections at once, perClient
// from one IP address; a connection over a cap is answered 421 and closed
// without reaching the SMTP server. Each connection it hands out is a
// sessionConn.
type sessionListener struct {
	net.Listener
	max, perClient int
	idle, life     time.Duration
	refused        func(reason string)
	opened         func(delta int)

	mu       sync.Mutex
	open     int
	byClient map[string]int
}

func (l *sessionListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		client := clientOf(c)
		if reason := l.take(client); reason != "" {
			l.refused(reason)
			go refuse(c)
			continue
		}
		l.opened(1)
		now := time.Now()
		return &sessionConn{
			Conn: c, end: now.Add(l.life), idle: l.idle, idleUntil: now.Add(l.idle),
			release: func() { l.give(client); l.opened(-1) },
		}, nil
	}
}

// take books a session for client; it answers why not ("" when booked).
func (l *sessionListener) take(client string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.open >= l.max:
		return "max_sessions"
	case l.byClient[client] >= l.perClient:
		return "per_client"
	}
	l.open++
	l.byClient[client]++
	return ""
}

func (l *sessionListener) give(client string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if l.byClient[client]--; l.byClient[client] <= 0 {
		delete(l.byClient, client)
	}
}

// refuse answers a connection over a cap and closes it; a peer that does
// not read cannot hold it longer than a second.
func refuse(c net.Conn) {
	_ = c.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = c.Write([]byte(busyReply)) // best effort: the peer may be gone; it retries either way
	_ = c.Close()
}

func clientOf(c net.Conn) string {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	host, _, err := net.SplitHostPort(c.RemoteAddr().String())
	if err != nil {
		return c.RemoteAddr().String()
	}
	return host
}

// sessionConn is one session's connection. It bounds every read deadline
// go-smtp sets (one per command, ReadTimeout ahead) by the session's end
// and by its idle limit, which only progress in the mail transaction
// (MAIL, RCPT, DATA: touch) moves on. When either passes, the pending read
// fails with a timeout and go-smtp answers 421 and closes the session.
type sessionConn struct {
	net.Conn
	idle    time.Duration
	release func()

	mu        sync.Mutex
	end       time.Time // the session's last moment
	idleUntil time.Time
	asked     time.Time // the read deadline go-smtp asked for
	closed    bool
}

func (c *sessionConn) limit() time.Time {
	if c.idleUntil.Before(c.end) {
		return c.idleUntil
	}
	return c.end
}

// SetReadDeadline applies the earlier of t and the session's limits.
func (c *sessionConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked = t
	return c.Conn.SetReadDeadline(c.bounded(t))
}

// SetDeadline applies the session's limits to reads as SetReadDeadline.
func (c *sessionConn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.Conn.SetWriteDeadline(t)
}

func (c *sessionConn) bounded(t time.Time) time.Time {
	if lim := c.limit(); t.IsZero() || lim.Before(t) {
		return lim
	}
	return t
}

// touch records progress in the mail transaction: the idle limit starts
// again, and applies at once to the read in progress (a DATA body).
func (c *sessionConn) touch() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.idleUntil = time.Now().Add(c.idle)
	_ = c.Conn.SetReadDeadline(c.bounded(c.asked)) // fails only on a closed connection, which the next read reports
}

// Close releases the session's place once.
func (c *sessionConn) Close() error {
	c.mu.Lock()
	first := !c.closed
	c.closed = true
	c.mu.Unlock()
	if first {
		c.release()
	}
	return c.Conn.Close()
}
