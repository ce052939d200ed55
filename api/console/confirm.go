package console

// confirmData is a confirmation page (template confirm): what will
// happen, and one POST form that does it, carrying the fields of the
// form that asked (hidden), so it works without JavaScript.
type confirmData struct {
	Heading string
	Lines   []string
	Action  string
	Fields  []hiddenField
	Button  string
	Danger  bool
	Back    string
	// AskAudience, above zero, is the number of readers the publisher
	// types to send (above the console's threshold).
	AskAudience int64
}

type hiddenField struct{ Name, Value string }
