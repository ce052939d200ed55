package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/newsletter/newsletter/services/catalog"

	"github.com/newsletter/newsletter/internal/audit"
	"github.com/newsletter/newsletter/internal/topics"
)

const topicsUsage = `usage:
  newsletter topics show          the stored topics and sequence, as JSON (GET /api/topics and /api/sequence)
  newsletter topics import FILE   replace the stored topics and sequence with a topics file's`

// topicsCmd is `newsletter topics show|import`. The topics live in Redis
// from the first start on (a topics file is only their first import);
// import is for an operator who keeps the file in version control: it
// replaces the stored topics and sequence with the file's, checked as a
// console save is (no topic removed, every step's mail renders), as a new
// version.
func topicsCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	sub, fs, args, err := storeSubcommand("topics", topicsUsage, args, getenv, stderr)
	if err != nil {
		return err
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch sub {
	case "show":
		if fs.NArg() != 0 {
			return errors.New(topicsUsage)
		}
		return withApp(ctx, getenv, stdout, stderr, func(a *app) error {
			snap := a.catalog.Snapshot()
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(map[string]any{"version": snap.Version, "topics": catalog.TopicsToJSON(snap.Set),
				"sequence": map[string]any{"topic": snap.Set.Sequence.Topic, "steps": catalog.StepsToJSON(snap.Set.Sequence)}})
		})
	case "import":
		if fs.NArg() != 1 {
			return errors.New(topicsUsage)
		}
		return withApp(ctx, getenv, stdout, stderr, func(a *app) error {
			set, err := topics.Load(fs.Arg(0), a.cfg.WelcomeDelay)
			if err != nil {
				return err
			}
			snap := a.catalog.Snapshot()
			saved, err := a.catalog.SaveTopics(ctx, *set, snap.Version, audit.CLIActor())
			if err != nil {
				return fmt.Errorf("%s: %w (nothing was changed)", fs.Arg(0), err)
			}
			a.note(ctx, audit.TopicsChanged, "topics", fmt.Sprintf("imported %s (version %d)", fs.Arg(0), saved.Version))
			fmt.Fprintf(stdout, "topics and sequence of %s stored as version %d; every role uses them within %s\n", fs.Arg(0), saved.Version, "a few seconds")
			return nil
		})
	}
	return fmt.Errorf("unknown subcommand %q\n%s", sub, topicsUsage)
}
