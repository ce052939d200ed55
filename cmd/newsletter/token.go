package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/newsletter/newsletter/internal/adminauth"
	"github.com/newsletter/newsletter/internal/audit"
)

const tokenUsage = `usage:
  newsletter token create --name N --role admin|editor|viewer   (prints the new token once)
  newsletter token list
  newsletter token revoke N`

// storeSubcommand splits the args of a command that works on the
// service's Redis (`newsletter token …`, `newsletter account …`): its
// subcommand, a flag set named for it, and the rest; an error without a
// subcommand (the usage) or without a Redis to work on.
func storeSubcommand(what, usage string, args []string, getenv func(string) string, stderr io.Writer) (string, *flag.FlagSet, []string, error) {
	if len(args) == 0 {
		return "", nil, nil, errors.New(usage)
	}
	fs := flag.NewFlagSet(what+" "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	if getenv("NEWSLETTER_REDIS_URL") == "" && getenv("NEWSLETTER_REDIS_CLUSTER_ADDRS") == "" {
		return "", nil, nil, errors.New("NEWSLETTER_REDIS_URL: the " + what + " commands work on the service's Redis; set it (or NEWSLETTER_REDIS_CLUSTER_ADDRS) as the service has it")
	}
	return args[0], fs, args[1:], nil
}

// tokenCmd is `newsletter token create|list|revoke`: the tokens of the
// API and the console, one per person or script, each with a role. The
// store keeps only a token's SHA-256 hash; the token is printed once, on
// stdout alone (TOKEN=$(newsletter token create …)), and cannot be shown
// again. A revoked token fails from the next request on: the guard looks
// tokens up on every request.
func tokenCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	sub, fs, args, err := storeSubcommand("token", tokenUsage, args, getenv, stderr)
	if err != nil {
		return err
	}
	switch sub {
	case "create":
		name := fs.String("name", "", "the token's name: who or what holds it (letters, digits, '.', '_', '-')")
		roleName := fs.String("role", "", "admin, editor or viewer")
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() != 0 {
			return errors.New(tokenUsage)
		}
		if err := adminauth.CheckTokenName(*name); err != nil {
			return err
		}
		if _, err := adminauth.ParseRole(*roleName); err != nil {
			return err
		}
		return withApp(ctx, getenv, stdout, stderr, func(a *app) error {
			tok, made, err := adminauth.MakeToken(ctx, a.store, *name, *roleName)
			if err != nil {
				return err
			}
			a.note(ctx, audit.TokenCreated, "token:"+made.Name, string(made.Role))
			if _, err := fmt.Fprintln(stdout, tok); err != nil {
				return err
			}
			fmt.Fprintf(stderr, "token %q (%s) created; it is shown only this once, and only its hash is stored\n", made.Name, made.Role)
			return nil
		})
	case "list":
		if err := fs.Parse(args); err != nil {
			return err
		}
		return withApp(ctx, getenv, stdout, stderr, func(a *app) error {
			list, err := a.store.ListTokens(ctx)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tROLE\tCREATED")
			for _, t := range list {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", t.Name, t.Role, t.Created.UTC().Format(time.RFC3339))
			}
			return tw.Flush()
		})
	case "revoke":
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() != 1 {
			return errors.New("give the name of one token\n" + tokenUsage)
		}
		name := fs.Arg(0)
		return withApp(ctx, getenv, stdout, stderr, func(a *app) error {
			if err := a.store.RevokeToken(ctx, name); err != nil {
				return fmt.Errorf("token %q: %w", name, err)
			}
			a.note(ctx, audit.TokenRevoked, "token:"+name, "")
			_, err := fmt.Fprintf(stdout, "token %q revoked\n", name)
			return err
		})
	}
	return fmt.Errorf("unknown subcommand %q\n%s", sub, tokenUsage)
}
