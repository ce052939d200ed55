// Command newsletter runs the newsletter service: one binary whose
// subcommands are its roles (serve, api, worker, scheduler) and its
// operator tools (import, digest run, issue create|send|preview, token
// create|list|revoke).
package main

import (
	"context"
	"fmt"
	"io"
	"os"
)

const usage = `usage: newsletter <command> [flags]

commands:
  serve        API, worker and scheduler in one process (default)
  api          the HTTP API only
  worker       the task worker only (sends mail, pushes, webhooks);
               --lanes email,push,webhook,sms: the lanes it serves (NEWSLETTER_LANES)
  scheduler    the periodic scheduler only
  bounces      the bounce intake only: an SMTP server for NEWSLETTER_BOUNCE_ADDRESS (NEWSLETTER_BOUNCE_SMTP_ADDR)
  import FILE  bulk-add subscribers from a CSV file, columns ` + importColumns + `
               (topics: ids separated by spaces or ;), an optional header row;
               --pending: add them as pending and send each a confirmation;
               a Mailchimp, Substack, Kit, Buttondown or listmonk export is recognised
               by its header row (printed with its mapping); --generic reads the header
               by our names, --map "COLUMN=FIELD" maps a column (FIELD empty: left out)
  digest run   plan the digest now [--period 2026-W49]
  issue create --subject S --topic T [--topic T2] [--preheader P] FILE.md
               store a Markdown file as a draft issue to those topics; prints its id
  issue send ID [--at 2026-04-01T09:00:00Z | --local-time 09:00]
               send it now, at a time, or at that hour of each reader's time zone
  issue preview ID [--topic T] [--format html|text|eml] [--out FILE]
               print the mail a reader of the topic gets (--out: into FILE, only when it succeeds)
  token create --name N --role admin|editor|viewer
               make a token for the API and the console; prints it once (only its hash is kept)
  token list   the tokens' names, roles and creation times (never the tokens)
  token revoke N
               end the token named N at once
  account create --email E --role admin|editor|viewer
               invite a person to the console; prints a one-time link (48 hours) where they
               choose a password and set up an authenticator app
  account list the console's accounts: addresses, roles, state, last sign-in
  topics show  the stored topics and onboarding sequence, as JSON
  topics import FILE
               replace the stored topics and sequence with a topics file's (the file is
               otherwise read only at the first start; edit them in the console)
  check        check the configuration, Redis and the mail transport (SMTP: connect,
               EHLO, STARTTLS, AUTH) as the service would meet them; exit 1 if any fails
  migrate --to-cluster --from redis://…
               copy the service's one Redis into the Redis Cluster of
               NEWSLETTER_REDIS_CLUSTER_ADDRS (every role stopped first)
  healthcheck  exit 0 when this machine's service answers /healthz (for containers)
  vapid generate
               print a new VAPID key pair for web push, as the two lines
               NEWSLETTER_VAPID_PUBLIC_KEY=… and NEWSLETTER_VAPID_PRIVATE_KEY=…

Configuration comes from NEWSLETTER_* environment variables; docs/reference.md
lists every one.
`

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// run is main without the process: tests call it with their own
// environment and writers.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if err := registerChannels(getenv); err != nil {
		fmt.Fprintf(stderr, "newsletter: %v\n", err)
		return 1
	}
	cmd := "serve"
	if len(args) > 0 {
		cmd, args = args[0], args[1:]
	}
	var err error
	switch cmd {
	case "serve":
		err = serveCmd(ctx, roles{api: true, worker: true, scheduler: true}, getenv, stdout, stderr)
	case "api":
		err = serveCmd(ctx, roles{api: true}, getenv, stdout, stderr)
	case "worker":
		r := roles{worker: true}
		if r.lanes, err = workerFlags(args, stderr); err == nil {
			err = serveCmd(ctx, r, getenv, stdout, stderr)
		}
	case "scheduler":
		err = serveCmd(ctx, roles{scheduler: true}, getenv, stdout, stderr)
	case "bounces":
		err = serveCmd(ctx, roles{bounces: true}, getenv, stdout, stderr)
	case "import":
		err = importCmd(ctx, args, getenv, stdout, stderr)
	case "digest":
		err = digestCmd(ctx, args, getenv, stdout, stderr)
	case "issue":
		err = issueCmd(ctx, args, getenv, stdout, stderr)
	case "token":
		err = tokenCmd(ctx, args, getenv, stdout, stderr)
	case "account":
		err = accountCmd(ctx, args, getenv, stdout, stderr)
	case "topics":
		err = topicsCmd(ctx, args, getenv, stdout, stderr)
	case "check":
		err = checkCmd(ctx, getenv, stdout)
	case "migrate":
		err = migrateCmd(ctx, args, getenv, stdout, stderr)
	case "healthcheck":
		err = healthcheckCmd(ctx, getenv)
	case "vapid":
		err = vapidCmd(args, stdout)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "newsletter: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "newsletter %s: %v\n", cmd, err)
		return 1
	}
	return 0
}
