package csvimport

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/newsletter/newsletter/internal/testkit/redistest"
	"github.com/newsletter/newsletter/store"
)

// sourceCase is one service's export, written the way the service writes
// it (made here, not copied): what it must be recognised as, and who
// comes in.
type sourceCase struct {
	name, source string
	file         string
	// columns is the expected mapping, by header name (absent: left out).
	columns map[string]string
	// active are the addresses added (with their name, tags, fields),
	// absent those that must not be on the list at all.
	active map[string]person
	absent []string
}

type person struct {
	name   string
	tags   []string
	fields map[string]string
}

func sourceCases() []sourceCase {
	mcHeader := `"Email Address","First Name","Last Name","Address","Phone Number","MEMBER_RATING","OPTIN_TIME","OPTIN_IP","CONFIRM_TIME","CONFIRM_IP","LATITUDE","LONGITUDE","GMTOFF","DSTOFF","TIMEZONE","CC","REGION","LAST_CHANGED","LEID","EUID","NOTES","TAGS"`
	return []sourceCase{{
		// Mailchimp: a byte order mark, every header quoted, CRLF, the name
		// in two columns, TAGS a quoted list of quoted names.
		name: "mailchimp subscribed", source: SourceMailchimp,
		file: "\ufeff" + mcHeader + "\r\n" +
			`ann@example.com,Ann,Lee,,,2,"2021-03-04 10:11:12",,"2021-03-04 10:12:00",1.2.3.4,,,,,America/New_York,US,NY,"2023-01-01 00:00:00",12345,abc123,,"""VIP Customer"",""2021 Cohort"""` + "\r\n" +
			`bob@example.com,Bob,,,,1,,,,,,,,,,,,,,,,` + "\r\n",
		columns: map[string]string{"Email Address": ColEmail, "First Name": ColFirstName, "Last Name": ColLastName, "TIMEZONE": ColTimezone, "TAGS": ColTags},
		active:  map[string]person{"ann@example.com": {name: "Ann Lee", tags: []string{"2021-cohort", "vip-customer"}}, "bob@example.com": {name: "Bob"}},
	}, {
		// Mailchimp writes the people who left in files of their own:
		// every row has its UNSUB_TIME (or CLEAN_TIME) set.
		name: "mailchimp unsubscribed", source: SourceMailchimp,
		file: mcHeader[:len(mcHeader)-len(`,"TAGS"`)] + `,"UNSUB_TIME","UNSUB_CAMPAIGN_TITLE","UNSUB_CAMPAIGN_ID","UNSUB_REASON","UNSUB_REASON_OTHER","TAGS"` + "\r\n" +
			`cat@example.com,Cat,,,,2,,,,,,,,,,,,,,,,"2022-05-05 09:00:00","Spring issue",abc,"I no longer want to receive these emails",,` + "\r\n",
		columns: map[string]string{"Email Address": ColEmail, "UNSUB_TIME": ColLeft},
		absent:  []string{"cat@example.com"},
	}, {
		// Substack: email_disabled true is a reader who turned email off.
		name: "substack", source: SourceSubstack,
		file: "email,active_subscription,expiry,plan,email_disabled,created_at\n" +
			"dan@example.com,false,,,false,2022-01-02T03:04:05.000Z\n" +
			"eve@example.com,true,2025-01-01T00:00:00.000Z,yearly,false,2022-02-02T03:04:05.000Z\n" +
			"fay@example.com,false,,,true,2022-03-02T03:04:05.000Z\n",
		columns: map[string]string{"email": ColEmail, "email_disabled": ColLeft},
		active:  map[string]person{"dan@example.com": {}, "eve@example.com": {}},
		absent:  []string{"fay@example.com"},
	}, {
		// Kit (ConvertKit): first_name, a status word per row, tags as one
		// quoted cell with commas, a custom field column.
		name: "kit", source: SourceKit,
		file: "first_name,email,created_at,status,tags,company\n" +
			"Gus,gus@example.com,2023-04-05 06:07:08 UTC,active,\"Newsletter, Paid Course\",Acme\n" +
			"Hal,hal@example.com,2023-04-05 06:07:08 UTC,cancelled,,\n" +
			"Ida,ida@example.com,2023-04-05 06:07:08 UTC,bounced,,\n" +
			"Jo,jo@example.com,2023-04-05 06:07:08 UTC,inactive,,\n",
		columns: map[string]string{"first_name": ColName, "email": ColEmail, "status": ColStatus, "tags": ColTags},
		active:  map[string]person{"gus@example.com": {name: "Gus", tags: []string{"newsletter", "paid-course"}}},
		absent:  []string{"hal@example.com", "ida@example.com", "jo@example.com"},
	}, {
		// Buttondown: subscriber_type, metadata as JSON, tags as a JSON list.
		name: "buttondown", source: SourceButtondown,
		file: "email,notes,metadata,tags,creation_date,subscriber_type,referrer_url\n" +
			`kim@example.com,met at a conference,"{""company"": ""Initech"", ""plan"": ""x""}","[""friends"", ""Early Bird""]",2020-06-01T10:00:00Z,regular,` + "\n" +
			`lou@example.com,,{},[],2020-06-01T10:00:00Z,premium,https://example.org/` + "\n" +
			`max@example.com,,{},[],2020-06-01T10:00:00Z,unsubscribed,` + "\n" +
			`ned@example.com,,{},[],2020-06-01T10:00:00Z,removed,` + "\n" +
			`oli@example.com,,{},[],2020-06-01T10:00:00Z,unactivated,` + "\n",
		columns: map[string]string{"email": ColEmail, "metadata": ColAttributes, "tags": ColTags, "subscriber_type": ColStatus},
		active: map[string]person{"kim@example.com": {tags: []string{"early-bird", "friends"}, fields: map[string]string{"company": "Initech"}},
			"lou@example.com": {}},
		absent: []string{"max@example.com", "ned@example.com", "oli@example.com"},
	}, {
		// listmonk: uuid, attributes as JSON, enabled and blocklisted.
		name: "listmonk", source: SourceListmonk,
		file: "uuid,email,name,attributes,status,created_at,updated_at\n" +
			`5e8d0f5c-1b7a-4c5e-9c1e-0a4f3c2b1a00,pam@example.com,Pam Ng,"{""company"": ""Globex"", ""city"": ""Bengaluru""}",enabled,2021-01-01 10:00:00.000000+00,2021-01-02 10:00:00.000000+00` + "\n" +
			`5e8d0f5c-1b7a-4c5e-9c1e-0a4f3c2b1a01,quin@example.com,Quin,{},blocklisted,2021-01-01 10:00:00.000000+00,2021-01-02 10:00:00.000000+00` + "\n",
		columns: map[string]string{"email": ColEmail, "name": ColName, "attributes": ColAttributes, "status": ColStatus},
		active:  map[string]person{"pam@example.com": {name: "Pam Ng", fields: map[string]string{"company": "Globex"}}},
		absent:  []string{"quin@example.com"},
	}}
}

// Each service's export is recognised by its header row, mapped to our
// fields, and imported: the people subscribed come in with their names,
// tags and declared fields; those who left, bounced, were blocklisted or
// never confirmed do not, each rejected with the reason.
func TestImportRecognisesServiceExports(t *testing.T) {
	for _, c := range sourceCases() {
		t.Run(c.name, func(t *testing.T) {
			rdb, _ := redistest.New(t, redistest.DBImport)
			st := store.NewRedis(rdb)
			ctx := context.Background()
			if _, err := st.DefineField(ctx, store.FieldDef{Name: "company", Type: store.FieldText}); err != nil {
				t.Fatal(err)
			}
			h, err := Preview(strings.NewReader(c.file), PreviewRows)
			m, rows := h.Mapping, h.Rows
			if err != nil || m.Source != c.source || !m.Header || len(rows) != len(c.active)+len(c.absent) {
				t.Fatalf("preview: %s header %v, %d rows, %v", m.Source, m.Header, len(rows), err)
			}
			for i, n := range m.Names {
				if want := c.columns[n]; m.Columns[i] != want && (want != "" || m.Columns[i] == ColEmail) {
					t.Errorf("column %q mapped to %q, want %q", n, m.Columns[i], want)
				}
			}
			lines, _ := CountLines(strings.NewReader(c.file))
			p, err := (&Importer{Store: st}).Run(ctx, strings.NewReader(c.file), lines, Progress{})
			if err != nil {
				t.Fatal(err)
			}
			if p.Header != 1 || p.Added != int64(len(c.active)) || p.RejectedTotal() != int64(len(c.absent)) {
				t.Fatalf("progress %+v", p)
			}
			for email, want := range c.active {
				s, err := st.Get(ctx, email)
				if err != nil || s.Status != store.Active || s.Name != want.name || !slices.Equal(s.Tags, want.tags) ||
					(len(want.fields) > 0 || len(s.Fields) > 0) && !maps.Equal(s.Fields, want.fields) {
					t.Errorf("%s: %+v %v, want %+v", email, s, err, want)
				}
			}
			for _, email := range c.absent {
				if _, err := st.Get(ctx, email); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("%s is on the list (%v): they were not subscribed", email, err)
				}
			}
		})
	}
}

// A mapping given (the console's step, the command's --map) overrides
// what was recognised: here a generic file whose address column has a
// name of its own, and a column left out.
func TestImportWithMappingGiven(t *testing.T) {
	rdb, _ := redistest.New(t, redistest.DBImport)
	st := store.NewRedis(rdb)
	ctx := context.Background()
	file := "Correo,Nombre,Zona\nrosa@example.com,Rosa,Nowhere/Else\n"
	h, err := Preview(strings.NewReader(file), 5)
	m := h.Mapping
	if err != nil || m.Header {
		t.Fatalf("a header without an address column is no header: %+v %v", m, err)
	}
	m = Mapping{Source: SourceGeneric, Header: true, Names: []string{"Correo", "Nombre", "Zona"}, Columns: make([]string, 3)}
	for col, to := range map[string]string{"correo": ColEmail, "Nombre": ColName} {
		if err := m.Set(col, to); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Set("Zona", "shoe_size!"); err == nil {
		t.Fatal("an unknown field was accepted")
	}
	if err := m.Set("Nope", ColName); err == nil {
		t.Fatal("an unknown column was accepted")
	}
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
	lines, _ := CountLines(strings.NewReader(file))
	p, err := (&Importer{Store: st, Mapping: &m}).Run(ctx, strings.NewReader(file), lines, Progress{})
	if err != nil || p.Added != 1 || p.Header != 1 {
		t.Fatalf("%+v %v", p, err)
	}
	if s, err := st.Get(ctx, "rosa@example.com"); err != nil || s.Name != "Rosa" || s.Timezone != "" {
		t.Fatalf("%+v %v", s, err)
	}
	if err := (Mapping{Columns: []string{ColName, ColName}}).Check(); err == nil {
		t.Fatal("a mapping without email, with name twice, was accepted")
	}
}

// Our own export's header stays generic (its status column read as ours);
// a header naming no address column is no header; the tag cells of each
// service split into their tags.
func TestRecogniseGenericAndTags(t *testing.T) {
	t.Parallel()
	m, ok := Recognise([]string{"email", "name", "timezone", "topics", "tags", "status", "created_at", "field.company"})
	if !ok || m.Source != SourceGeneric || !slices.Equal(m.Columns, []string{ColEmail, ColName, ColTimezone, ColTopics, ColTags, ColStatus, "", "field.company"}) {
		t.Fatalf("our export: %+v", m)
	}
	if m, ok := Recognise([]string{"E-Mail", "First Name", "Last Name"}); !ok || !slices.Equal(m.Columns, []string{ColEmail, ColFirstName, ColLastName}) {
		t.Fatalf("common spellings: %+v", m)
	}
	if m, ok := Recognise([]string{"ann@example.com", "Ann"}); ok || m.Header || m.Columns[0] != ColEmail {
		t.Fatalf("a row is no header: %+v", m)
	}
	for in, want := range map[string][]string{
		`"VIP Customer","2021 Cohort"`: {"VIP Customer", "2021 Cohort"},
		`["a", "b"]`:                   {"a", "b"},
		"beta; vip":                    {"beta", " vip"},
		"x, y":                         {"x", " y"},
	} {
		if got := splitTags(in); !slices.Equal(got, want) {
			t.Errorf("splitTags(%q) = %q, want %q", in, got, want)
		}
	}
	if got := slugTag("  VIP  Customer! "); got != "vip-customer" {
		t.Errorf("slugTag: %q", got)
	}
}
