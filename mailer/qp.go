package mailer

// qpState is mime/quotedprintable.Writer (text mode) as a value: the same
// output byte for byte, but the encoder's state (the line being built, and
// whether a CR was just seen) can be copied. A prepared mail encodes the
// text shared by all its readers once, keeps the state where a reader's
// value starts, and encodes only from there for each reader (encode.go).
//
// Quoted-printable output depends on where a line stands (a soft line
// break every 76 columns), so a value spliced into already-encoded text
// would move the breaks after it; encoding resumes from the copied state
// up to the next hard line break, after which the output no longer depends
// on what came before. qp_test.go checks it against the standard library.
type qpState struct {
	line [qpLineMax + 2]byte
	i    int
	cr   bool
}

const qpLineMax = 76

const upperHex = "0123456789ABCDEF"

// write appends to dst what encoding p adds to the output.
func (s *qpState) write(dst []byte, p string) []byte {
	for k := 0; k < len(p); k++ {
		b := p[k]
		switch {
		case b >= '!' && b <= '~' && b != '=', b == ' ', b == '\t':
			if s.i == qpLineMax-1 {
				dst = s.softBreak(dst)
			}
			s.line[s.i] = b
			s.i++
			s.cr = false
		case b == '\n' || b == '\r':
			// The standard writer turns CR, LF and CRLF into CRLF.
			if s.cr && b == '\n' {
				s.cr = false
				continue
			}
			if b == '\r' {
				s.cr = true
			}
			dst = s.lastByte(dst)
			dst = s.crlf(dst)
		default:
			// Encoding a byte leaves cr as it was, as the standard
			// writer does.
			dst = s.encode(dst, b)
		}
	}
	return dst
}

// close appends what closing the encoder adds.
func (s *qpState) close(dst []byte) []byte {
	dst = s.lastByte(dst)
	dst = append(dst, s.line[:s.i]...)
	s.i = 0
	return dst
}

// zero reports whether nothing is pending: the state at the start of a
// line, after a hard line break.
func (s *qpState) zero() bool { return s.i == 0 && !s.cr }

func (s *qpState) encode(dst []byte, b byte) []byte {
	if qpLineMax-1-s.i < 3 {
		dst = s.softBreak(dst)
	}
	s.line[s.i] = '='
	s.line[s.i+1] = upperHex[b>>4]
	s.line[s.i+2] = upperHex[b&0x0f]
	s.i += 3
	return dst
}

// lastByte encodes a space or tab that ends a line.
func (s *qpState) lastByte(dst []byte) []byte {
	if s.i == 0 {
		return dst
	}
	if b := s.line[s.i-1]; b == ' ' || b == '\t' {
		s.i--
		dst = s.encode(dst, b)
	}
	return dst
}

func (s *qpState) softBreak(dst []byte) []byte {
	s.line[s.i] = '='
	s.i++
	return s.crlf(dst)
}

func (s *qpState) crlf(dst []byte) []byte {
	dst = append(dst, s.line[:s.i]...)
	s.i = 0
	return append(dst, '\r', '\n')
}
