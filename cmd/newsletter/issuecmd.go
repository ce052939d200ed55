package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/services/issues"
	"github.com/newsletter/newsletter/services/presend"
	"github.com/newsletter/newsletter/store"
	"github.com/newsletter/newsletter/tasks"
)

const issueUsage = `usage:
  newsletter issue create --subject S --topic T [--topic T2] [--preheader P] FILE.md   (prints the id)
  newsletter issue send ID [--at 2026-04-01T09:00:00Z | --local-time 09:00] [--force] [--ignore-checks]
  newsletter issue preview ID [--topic T] [--format html|text|eml] [--out FILE]`

// issueCmd is `newsletter issue create|send|preview`: a publisher keeps
// issues as Markdown files in git and sends them from a script. The
// commands talk to the service's Redis through the store, check what they
// are given as the API does (issues.CheckContent, the issues
// service, issues.Preview), and change nothing when it is wrong.
func issueCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New(issueUsage)
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("issue "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	run := func(fn func(*app) error) error { return withApp(ctx, getenv, stdout, stderr, fn) }
	switch sub {
	case "create":
		return issueCreateCmd(ctx, fs, args, stdout, run)
	case "send":
		return issueSendCmd(ctx, fs, args, stdout, run)
	case "preview":
		return issuePreviewCmd(ctx, fs, args, stdout, run)
	}
	return fmt.Errorf("unknown subcommand %q\n%s", sub, issueUsage)
}

// issueCreateCmd is `issue create`: a draft from a Markdown file.
func issueCreateCmd(ctx context.Context, fs *flag.FlagSet, args []string, stdout io.Writer, run func(func(*app) error) error) error {
	subject := fs.String("subject", "", "the subject (one line, at most 200 characters)")
	preheader := fs.String("preheader", "", "the line shown after the subject in the inbox")
	var topicList multiFlag
	fs.Var(&topicList, "topic", "a topic of the audience (repeat for more)")
	pos, err := parseAnywhere(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("give one Markdown file\n" + issueUsage)
	}
	body, err := readBody(pos[0])
	if err != nil {
		return err
	}
	c := store.IssueContent{Subject: strings.TrimSpace(*subject), Preheader: strings.TrimSpace(*preheader), Body: body, Topics: topicList}
	return run(func(a *app) error {
		if err := issues.CheckContent(a.catalog.Current(), c); err != nil {
			return err
		}
		is, err := a.store.CreateIssue(ctx, c, "")
		if err != nil {
			return err
		}
		a.note(ctx, audit.IssueCreated, "issue:"+strconv.FormatInt(is.ID, 10), is.Slug)
		fmt.Fprintln(stdout, is.ID)
		return nil
	})
}

// issueSendCmd is `issue send`: now, at a time, or at a local hour.
func issueSendCmd(ctx context.Context, fs *flag.FlagSet, args []string, stdout io.Writer, run func(func(*app) error) error) error {
	at := fs.String("at", "", "send at this time (RFC 3339), not now")
	local := fs.String("local-time", "", "send at this hour (HH:MM) of each reader's own time zone")
	force := fs.Bool("force", false, "send even when the issue would reach 0 readers, or its HTML part is over Gmail's clip (102 KB)")
	ignore := fs.Bool("ignore-checks", false, "send even when a pre-send check found an error (a link that answers 404)")
	confirm := fs.Int64("confirm-audience", -1, "refuse the send unless it reaches exactly this many readers")
	id, err := issueID(fs, args)
	if err != nil {
		return err
	}
	return run(func(a *app) error {
		jobs := tasks.NewDispatcher(a.newClient(), a.store, a.log)
		defer jobs.Close()
		is, err := a.store.Issue(ctx, id)
		if err != nil {
			return err
		}
		opt := issues.SendOptions{Force: *force, IgnoreChecks: *ignore}
		if *confirm >= 0 {
			opt.ConfirmAudience = confirm
		}
		when := issues.When{At: *at, LocalTime: *local}
		sizer, err := a.issuePreviewer("html")
		if err != nil {
			return err
		}
		svc := a.issueService(a.store, jobs, sizer)
		is, rep, err := svc.SendReported(ctx, is, when, opt)
		if err != nil {
			return err
		}
		n := rep.Audience
		a.note(ctx, audit.IssueSent, "issue:"+strconv.FormatInt(is.ID, 10), issues.SendDetail(when, rep)+" (command)")
		fmt.Fprintf(stdout, "issue %d %s to %d readers; progress: GET /api/issues/%d/progress\n", is.ID, is.Status, n, is.ID)
		return nil
	})
}

// issuePreviewCmd is `issue preview`: the mail as a reader gets it.
func issuePreviewCmd(ctx context.Context, fs *flag.FlagSet, args []string, stdout io.Writer, run func(func(*app) error) error) error {
	topic := fs.String("topic", "", "as a reader of this topic gets it (default: the issue's first)")
	format := fs.String("format", "html", "html, text or eml (the whole message as it goes out)")
	out := fs.String("out", "", "write the preview to this file, only when it succeeds (default: stdout)")
	id, err := issueID(fs, args)
	if err != nil {
		return err
	}
	return run(func(a *app) error {
		is, err := a.store.Issue(ctx, id)
		if err != nil {
			return err
		}
		r, err := a.issuePreviewer(*format)
		if err != nil {
			return err
		}
		_, body, err := issues.Preview(ctx, r, is, *topic, *format)
		if err != nil {
			return err
		}
		if *out != "" {
			return writeWhole(*out, body)
		}
		_, err = stdout.Write(body)
		return err
	})
}

// withApp runs fn on the service's Redis. The embedded Redis would be a
// throwaway one nobody sends from: the commands refuse it.
func withApp(ctx context.Context, getenv func(string) string, stdout, stderr io.Writer, fn func(*app) error) error {
	if getenv("NEWSLETTER_REDIS_URL") == "" && getenv("NEWSLETTER_REDIS_CLUSTER_ADDRS") == "" {
		return errors.New("NEWSLETTER_REDIS_URL: the issue commands work on the service's Redis; set it (or NEWSLETTER_REDIS_CLUSTER_ADDRS) as the service has it")
	}
	a, err := newApp(ctx, getenv, stdout, stderr)
	if err != nil {
		return err
	}
	defer a.close()
	return fn(a)
}

// issuePreviewer renders as the service does. It has no mail transport:
// a preview sends nothing, and an eml preview composes the MIME message
// as the SMTP mailer would (app.mimeComposer).
func (a *app) issuePreviewer(format string) (issues.Renderer, error) {
	render, err := liveRenderer(a)
	if err != nil {
		return nil, fmt.Errorf("NEWSLETTER_TEMPLATE_DIR: %w", err)
	}
	x := &issueMail{render: render, links: a.links()}
	if format == "eml" {
		if x.mime, err = a.mimeComposer(nil); err != nil {
			return nil, err
		}
	}
	return x, nil
}

// writeWhole writes b to path only whole: into a new file beside it,
// then renamed over it, so a failed preview leaves no empty or partial
// file, and an earlier one stays as it was.
func writeWhole(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Chmod(0o644) // a preview holds nothing secret: readable like any file the shell writes
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name()) // the half-written file; the error that matters is err
		return fmt.Errorf("--out %s: %w", path, err)
	}
	return nil
}

// readBody reads a Markdown file, refusing one over the limit before it
// is all in memory.
func readBody(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }() // read-only: closing cannot lose data
	b, err := io.ReadAll(io.LimitReader(f, issues.MaxBody+1))
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if len(b) > issues.MaxBody {
		return "", fmt.Errorf("%s: %w", path, issues.ErrTooLarge)
	}
	return string(b), nil
}

// issueID parses fs's flags anywhere in args and the one issue id among
// them.
func issueID(fs *flag.FlagSet, args []string) (int64, error) {
	pos, err := parseAnywhere(fs, args)
	if err != nil {
		return 0, err
	}
	if len(pos) != 1 {
		return 0, errors.New("give one issue id\n" + issueUsage)
	}
	id, err := strconv.ParseInt(pos[0], 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("%q is not an issue id (the number `issue create` printed)", pos[0])
	}
	return id, nil
}

// parseAnywhere parses fs's flags before and after the positional
// arguments (`send 3 --at T` as well as `send --at T 3`) and returns the
// positional ones.
func parseAnywhere(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos, args = append(pos, args[0]), args[1:]
	}
}

// multiFlag is a flag that may be given more than once.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// issueService is the binary's issues.Service over st and jobs: the API
// and the console share the one buildAPI makes, and the issue command
// makes its own the same way, so a send from any of them is gated alike
// (the settings' postal address, the renderer's size guard; r nil: no
// templates, no size guard).
func (a *app) issueService(st store.Issues, jobs issues.Dispatcher, r issues.Renderer) *issues.Service {
	return issues.New(issues.Parts{Store: st, Jobs: jobs, Log: a.log, BulkReady: a.settings.BulkReady, Sizer: r, Checker: a.issueChecker(r)})
}

// issueChecker is the pre-send checks of the issues r renders (nil: no
// renderer, nothing to check): the links asked through the same SSRF
// guard as the webhooks (NEWSLETTER_WEBHOOK_ALLOW_PRIVATE lets a
// development setup's local links through), one cache per process.
func (a *app) issueChecker(r issues.Renderer) *issues.Checker {
	if r == nil {
		return nil
	}
	a.linksOnce.Do(func() { a.linkCheck = presend.NewLinkChecker(a.cfg.Endpoints()) })
	return &issues.Checker{Renderer: r, Checks: &presend.Checker{Links: a.linkCheck},
		PostalAddress: func(ctx context.Context) string { return a.settings.Current(ctx).PostalAddress }}
}
