package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/newsletter/newsletter/internal/adminauth"
	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/services/accounts"
)

const accountUsage = `usage:
  newsletter account create --email E --role admin|editor|viewer   (prints a one-time link, valid 48 hours)
  newsletter account list`

// accountCmd is `newsletter account create|list`: the console's accounts.
// create makes an invite and prints its link on stdout alone (nothing is
// mailed: the one who runs it hands the link on, or opens it); whoever
// opens it chooses the password and sets up the authenticator app there,
// as a colleague invited from the console does. So no password ever
// passes through a terminal, a shell history or a process list, and the
// first admin is made the same way as every other account.
func accountCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	sub, fs, args, err := storeSubcommand("account", accountUsage, args, getenv, stderr)
	if err != nil {
		return err
	}
	switch sub {
	case "create":
		email := fs.String("email", "", "the person's e-mail address")
		roleName := fs.String("role", "", "admin, editor or viewer")
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() != 0 {
			return errors.New(accountUsage)
		}
		if _, _, err := accounts.CheckInvite(*email, *roleName); err != nil {
			return err
		}
		return withApp(ctx, getenv, stdout, stderr, func(a *app) error {
			iv := &accounts.Inviter{Store: a.store, BaseURL: a.cfg.BaseURL, Now: time.Now}
			inv, link, err := iv.Invite(ctx, adminauth.Principal{Name: audit.CLIActor(), Role: adminauth.Admin}, *email, *roleName)
			if err != nil {
				return fmt.Errorf("account %s: %w", *email, err)
			}
			a.note(ctx, audit.AccountInvited, audit.Account(inv.Email), string(inv.Role))
			if _, err := fmt.Fprintln(stdout, link); err != nil {
				return err
			}
			fmt.Fprintf(stderr, "open this link to choose the password and set up the authenticator app of %s (%s); it works once, until %s\n",
				inv.Email, inv.Role, inv.Expires.UTC().Format(time.RFC3339))
			return nil
		})
	case "list":
		if err := fs.Parse(args); err != nil {
			return err
		}
		return withApp(ctx, getenv, stdout, stderr, func(a *app) error {
			list, err := a.store.ListAccounts(ctx)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "EMAIL\tROLE\tSTATE\tLAST SIGNED IN")
			for _, ac := range list {
				state, last := "active", "never"
				if ac.Suspended {
					state = "suspended"
				}
				if !ac.LastSignIn.IsZero() {
					last = ac.LastSignIn.UTC().Format(time.RFC3339)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", ac.Email, ac.Role, state, last)
			}
			return tw.Flush()
		})
	}
	return fmt.Errorf("unknown subcommand %q\n%s", sub, accountUsage)
}
