package mailer

// Compose is msg as Send would put it on the wire (every header, the
// DKIM signature), without sending it: an issue's preview as .eml.
func (s *SMTP) Compose(msg *Message) ([]byte, error) {
	_, data, err := s.message(msg, nil)
	return data, err
}
