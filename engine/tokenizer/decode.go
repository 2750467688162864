package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// buildPieces renders every token once, as llama.cpp's token-to-piece cache
// (with special tokens rendered: Piece and Decode hide them).
func (t *Tokenizer) buildPieces() {
	n := t.text.len()
	t.pieceOff = make([]uint32, n+1)
	data := make([]byte, 0, n*6)
	for id := 0; id < n; id++ {
		data = t.appendPiece(data, int32(id))
		t.pieceOff[id+1] = uint32(len(data))
	}
	t.pieceData = data
}

func (t *Tokenizer) appendPiece(dst []byte, id int32) []byte {
	text := t.text.at(int(id))
	a := t.attrs[id]
	if a&(attrUnknown|attrControl|attrUserDefined) != 0 {
		return append(dst, text...)
	}
	kind := t.kind
	if t.spmBPE {
		kind = SPM // its pieces are SentencePiece's
	}
	switch kind {
	case SPM, WPM, UGM:
		switch {
		case a&attrNormal != 0:
			for {
				i := strings.Index(text, "\u2581")
				if i < 0 {
					break
				}
				dst = append(append(dst, text[:i]...), ' ')
				text = text[i+len("\u2581"):]
			}
			return append(dst, text...)
		case a&attrByte != 0:
			return append(dst, hexByte(text))
		}
	case BPE:
		if a&attrNormal != 0 {
			for i := 0; i < len(text); {
				r, n := decodeCpt(text, i)
				i += n
				if r >= 0 && int(r) < len(byteLevelInv) && byteLevelInv[r] != 0 {
					dst = append(dst, byte(byteLevelInv[r]-1))
					continue
				}
				// A character outside the byte-level alphabet: llama.cpp
				// writes this marker.
				var tmp [4]byte
				dst = append(dst, "[UNK_BYTE_0x"...)
				for _, c := range appendUTF8(tmp[:0], r) {
					dst = append(dst, "0123456789abcdef"[c>>4], "0123456789abcdef"[c&15])
				}
				dst = append(append(dst, text...), ']')
			}
			return dst
		}
	}
	return dst
}

// hexByte parses the XX of a byte token "<0xXX>" as strtol would.
func hexByte(s string) byte {
	if len(s) < 5 {
		return 0
	}
	var v byte
	for _, c := range []byte(s[3:5]) {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | (c - '0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | (c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | (c - 'A' + 10)
		default:
			return v
		}
	}
	return v
}

// Piece returns the bytes id contributes to decoded text: byte tokens give
// their byte, '▁' reads as a space, GPT-2 byte-level characters are mapped
// back, and control and unknown tokens give nothing. The result may be part
// of a UTF-8 character; it aliases internal storage and must not be
// modified.
func (t *Tokenizer) Piece(id int32) []byte {
	if !t.valid(id) || t.attrs[id]&(attrUnknown|attrControl) != 0 {
		return nil
	}
	return t.pieceData[t.pieceOff[id]:t.pieceOff[id+1]:t.pieceOff[id+1]]
}

// PieceSpecial is Piece that also renders control and unknown tokens as
// their text (like "<|im_end|>").
func (t *Tokenizer) PieceSpecial(id int32) []byte {
	if !t.valid(id) {
		return nil
	}
	return t.pieceData[t.pieceOff[id]:t.pieceOff[id+1]:t.pieceOff[id+1]]
}

// Decode turns ids back into text as llama.cpp's detokenize: control and
// unknown tokens are not rendered, the first piece loses one leading space
// when the vocabulary adds a space prefix (so text encoded without BOS comes
// back unchanged, while a leading BOS keeps the space), and vocabularies
// that ask for it get their spaces before punctuation and contractions
// cleaned up. The result may hold invalid UTF-8 if the ids do.
func (t *Tokenizer) Decode(ids []int32) string {
	return string(t.AppendDecode(nil, ids))
}

// AppendDecode is Decode appending to dst.
func (t *Tokenizer) AppendDecode(dst []byte, ids []int32) []byte {
	start := len(dst)
	removeSpace := t.addSpacePrefix
	for _, id := range ids {
		p := t.Piece(id)
		if removeSpace && len(p) > 0 && p[0] == ' ' {
			p = p[1:]
		}
		removeSpace = false
		dst = append(dst, p...)
	}
	if t.cleanSpaces {
		dst = dst[:start+cleanSpaces(dst[start:])]
	}
	return dst
}

// cleanSpaces applies, in place, llama.cpp's clean_up_tokenization_spaces
// passes and returns the new length: " ?", " !", " .", " ," lose the space;
// " ' " becomes "'"; " 's", " 'm", " 're", " 've" lose the space.
func cleanSpaces(b []byte) int {
	n := len(b)
	if n == 0 {
		return 0
	}
	total := 1
	for i := 1; i < n; i++ {
		x := b[i]
		if b[i-1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',') {
			total--
		}
		b[total] = x
		total++
	}

	n, total = total, 1
	for i := 1; i < n; i++ {
		x := b[i]
		if x == '\'' && i+1 < n && b[i-1] == ' ' && b[i+1] == ' ' {
			total--
			i++
			b[i] = 0 // as llama.cpp: the skipped space no longer counts as one
		}
		b[total] = x
		total++
	}

	n, total = total, 1
	for i := 1; i < n; i++ {
		x := b[i]
		if b[i-1] == ' ' && x == '\'' && i+1 < n {
			x1 := b[i+1]
			switch {
			case x1 == 't' || x1 == 'd':
			case x1 == 's' || x1 == 'm':
				total--
			case i+2 < n:
				x2 := b[i+2]
				if (x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e') {
					total--
				}
			}
		}
		b[total] = x
		total++
	}
	return total
}

// StreamDecoder decodes tokens one at a time, as a model generates them. The
// text it returns, joined, equals Decode of all the tokens; it holds back
// bytes that could still become part of a UTF-8 character, and for
// vocabularies whose decoding cleans up spaces, text whose cleanup depends
// on what comes next.
type StreamDecoder struct {
	t       *Tokenizer
	started bool
	pending []byte
	checked int // cut points up to here were tried and can never become final
	out     []byte
	special bool // control and unknown tokens render as their text
}

// SetRenderSpecial makes the stream render control and unknown tokens as
// their text (PieceSpecial), as llama.cpp's detokenize with special=true
// does; by default they render as nothing.
func (d *StreamDecoder) SetRenderSpecial(on bool) { d.special = on }

// NewStreamDecoder starts a stream that decodes as Decode would the same
// tokens (so a SentencePiece stream loses the leading space of its first
// piece unless it starts with BOS).
func NewStreamDecoder(t *Tokenizer) *StreamDecoder { return &StreamDecoder{t: t} }

// NewContinuationDecoder starts a stream of tokens that continue earlier
// text, such as a model's output after its prompt: the first piece keeps its
// leading space.
func NewContinuationDecoder(t *Tokenizer) *StreamDecoder {
	return &StreamDecoder{t: t, started: true}
}

// Reset starts a new stream.
func (d *StreamDecoder) Reset() {
	d.started = false
	d.pending = d.pending[:0]
	d.checked = 0
}

// ResetContinuation starts a new stream that continues earlier text, as
// NewContinuationDecoder, keeping the buffers.
func (d *StreamDecoder) ResetContinuation() {
	d.Reset()
	d.started = true
}

// Add decodes one more token and returns the text that became final.
func (d *StreamDecoder) Add(id int32) string {
	d.out = d.AppendAdd(d.out[:0], id)
	return string(d.out)
}

// Flush returns all the text held back: the end of the stream.
func (d *StreamDecoder) Flush() string {
	d.out = d.AppendFlush(d.out[:0])
	return string(d.out)
}

// AppendAdd is Add appending the final text to dst, without allocating.
func (d *StreamDecoder) AppendAdd(dst []byte, id int32) []byte {
	p := d.t.Piece(id)
	if d.special {
		p = d.t.PieceSpecial(id)
	}
	if !d.started {
		d.started = true
		if d.t.addSpacePrefix && len(p) > 0 && p[0] == ' ' {
			p = p[1:]
		}
	}
	d.pending = append(d.pending, p...)
	return d.emit(dst, d.cut())
}

// AppendFlush is Flush appending to dst.
func (d *StreamDecoder) AppendFlush(dst []byte) []byte {
	return d.emit(dst, len(d.pending))
}

// emit moves the first cut pending bytes, cleaned up, to dst.
func (d *StreamDecoder) emit(dst []byte, cut int) []byte {
	if cut == 0 {
		return dst
	}
	start := len(dst)
	dst = append(dst, d.pending[:cut]...)
	if d.t.cleanSpaces {
		dst = dst[:start+cleanSpaces(dst[start:])]
	}
	n := copy(d.pending, d.pending[cut:])
	d.pending = d.pending[:n]
	d.checked = 0
	return dst
}

// cut returns how much of the pending text is final. Cleanup rules look at
// most three bytes around a space or apostrophe, so text ending in three
// other bytes decodes the same whatever follows. Whether a cut point
// qualifies depends only on the bytes before it, so each is tried once.
func (d *StreamDecoder) cut() int {
	b := d.pending
	low := d.checked
	d.checked = len(b)
	for s := len(b); s > low; s-- {
		if d.t.cleanSpaces {
			if s < 3 {
				return 0
			}
			if !ordinary(b[s-1]) || !ordinary(b[s-2]) || !ordinary(b[s-3]) {
				continue
			}
		}
		if completeUTF8(b[:s]) {
			return s
		}
	}
	return 0
}

func ordinary(c byte) bool { return c != ' ' && c != '\'' }

// completeUTF8 reports whether b does not end inside a UTF-8 character that
// more bytes could complete.
func completeUTF8(b []byte) bool {
	for k := 1; k <= 3 && k <= len(b); k++ {
		c := b[len(b)-k]
		if c&0xC0 != 0x80 { // lead or ASCII byte
			return utf8.FullRune(b[len(b)-k:])
		}
	}
	return true
}
