package form

import "net/http"

// Topics is the form that sets a subscriber's topics (the ticked boxes).
type Topics struct {
	Topics []string
}

// NewTopics reads the topics form.
func NewTopics(w http.ResponseWriter, r *http.Request) (Topics, error) {
	if err := parse(w, r, MaxForm); err != nil {
		return Topics{}, err
	}
	return Topics{Topics: r.PostForm["topics"]}, nil
}
