// Command send is `make bench-send`: mails per second through the SMTP
// pool with 1, 4 and 16 connections into a loopback sink, next to a bare
// SMTP client loop (net/smtp, one connection, one mail after another)
// against the same sink in the same run.
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/newsletter/newsletter/bench"
	"github.com/newsletter/newsletter/channels/email"
	"github.com/newsletter/newsletter/mailer"
	"github.com/newsletter/newsletter/worker"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-send:", err)
		os.Exit(1)
	}
}

func run() error {
	dur := bench.Duration(5 * time.Second)
	sink, err := bench.StartSink()
	if err != nil {
		return err
	}
	defer sink.Close()

	bare, err := bench.BareLoop(sink.Addr, bench.Body4K, dur)
	if err != nil {
		return err
	}
	fmt.Printf("4 KB mails into a loopback sink, %s each\n", dur)
	fmt.Printf("bare SMTP loop (net/smtp, 1 conn)  %s\n", bare)

	host, port, _ := net.SplitHostPort(sink.Addr)
	p, _ := strconv.Atoi(port)
	for _, conns := range []int{1, 4, 16} {
		pool, err := email.NewSMTP(email.SMTPOptions{Server: email.Server{Host: host, Port: p, TLS: "none"}, PoolSize: conns})
		if err != nil {
			return err
		}
		// As the worker sends: composed by mailer, carried by the pool.
		m, err := worker.NewSMTPEmail(mailer.ComposeOptions{From: "News <news@example.com>"}, nil, pool)
		if err != nil {
			return err
		}
		ctx := context.Background()
		res := bench.Load(conns, dur, func(n int64) error {
			return m.Send(ctx, &mailer.Message{
				Kind: mailer.KindDigest, To: "r" + strconv.FormatInt(n, 10) + "@example.org", Subject: "What is new",
				Text: bench.Body4K, UnsubscribeURL: "https://news.example.com/unsubscribe?token=abc",
			})
		})
		bench.Warn("close SMTP pool", m.Close())
		fmt.Printf("pool, %2d connection(s)             %s  %3.0f%% of bare\n", conns, res, 100*res.Rate()/bare.Rate())
	}
	fmt.Println("target: the pool with 16 connections reaches at least 80% of the bare loop")
	return nil
}
