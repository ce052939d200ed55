// Command send is `make bench-send`: mails per second through the SMTP
// pool with 1, 4 and 16 connections into a loopback sink, next to a bare
// SMTP client loop (net/smtp, one connection, one mail after another)
// against the same sink in the same run.
package main

import (
	"context"
	"fmt"
	"net"
	"net/smtp"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/newsletter/newsletter/internal/bench"
	"github.com/newsletter/newsletter/internal/config"
	"github.com/newsletter/newsletter/mailer"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-send:", err)
		os.Exit(1)
	}
}

// body4K is about 4 KB of text, the size of a typical digest's text part.
var body4K = strings.Repeat("A line of a newsletter digest, long enough to look like one.\n", 66)

func run() error {
	dur := 5 * time.Second
	if d, err := time.ParseDuration(os.Getenv("BENCH_DURATION")); err == nil {
		dur = d
	}
	sink, err := bench.StartSink()
	if err != nil {
		return err
	}
	defer sink.Close()

	bare, err := bareLoop(sink.Addr, dur)
	if err != nil {
		return err
	}
	fmt.Printf("4 KB mails into a loopback sink, %s each\n", dur)
	fmt.Printf("bare SMTP loop (net/smtp, 1 conn)  %s\n", bare)

	host, port, _ := net.SplitHostPort(sink.Addr)
	p, _ := strconv.Atoi(port)
	for _, conns := range []int{1, 4, 16} {
		m, err := mailer.NewSMTP(mailer.SMTPOptions{
			Server: config.SMTP{Host: host, Port: p, TLS: "none"}, From: "News <news@example.com>", PoolSize: conns,
		})
		if err != nil {
			return err
		}
		ctx := context.Background()
		res := bench.Load(conns, dur, func(n int64) error {
			return m.Send(ctx, &mailer.Message{
				Kind: mailer.KindDigest, To: "r" + strconv.FormatInt(n, 10) + "@example.org", Subject: "What is new",
				Text: body4K, UnsubscribeURL: "https://news.example.com/unsubscribe?token=abc",
			})
		})
		m.Close()
		fmt.Printf("pool, %2d connection(s)             %s  %3.0f%% of bare\n", conns, res, 100*res.Rate()/bare.Rate())
	}
	fmt.Println("target: the pool with 16 connections reaches at least 80% of the bare loop")
	return nil
}

// bareLoop is the baseline: the least a client can do per mail.
func bareLoop(addr string, d time.Duration) (bench.Result, error) {
	c, err := smtp.Dial(addr)
	if err != nil {
		return bench.Result{}, err
	}
	defer c.Quit()
	msg := []byte("From: news@example.com\r\nTo: r@example.org\r\nSubject: What is new\r\n\r\n" + strings.ReplaceAll(body4K, "\n", "\r\n"))
	var failed error
	res := bench.Load(1, d, func(int64) error {
		if err := c.Mail("news@example.com"); err != nil {
			failed = err
			return err
		}
		if err := c.Rcpt("r@example.org"); err != nil {
			return err
		}
		w, err := c.Data()
		if err != nil {
			return err
		}
		w.Write(msg)
		return w.Close()
	})
	return res, failed
}
