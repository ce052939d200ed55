package mailer

import "bytes"

// Compose is msg as Send would put it on the wire (every header, the
// DKIM signature), without sending it: an issue's preview as .eml.
func (s *SMTP) Compose(msg *Message) ([]byte, error) {
	m, err := s.build(msg)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if _, err := m.WriteTo(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
