// Package tokenizer turns text into token ids and back for the vocabularies
// GGUF files carry: SentencePiece-style BPE over scores ("llama"), GPT-2
// byte-level BPE with merges and per-model pre-tokenizers ("gpt2"), BPE
// over UTF-8 characters ("gemma4", and "whitespace", which merges each
// run between whitespace alone), WordPiece ("bert", with the BERT
// normalizer's lowercase and strip-accents options) and SentencePiece
// Unigram ("t5"). It reproduces
// llama.cpp's tokenizer (build 4748; the Unigram one as of llama.cpp
// 0.3.36) exactly, quirks included, because models are trained and
// evaluated with the ids it produces.
//
// Known differences from llama.cpp, none reachable with the vocabularies
// tested: merges whose sides or result are not tokens are not applied (see
// buildMerges); a SentencePiece character with no byte token becomes UNK
// where llama.cpp throws; code points past U+10FFFF become U+FFFD where
// llama.cpp throws; ties between special tokens of equal length are broken
// by id where llama.cpp's order is unspecified. The "rwkv" vocabulary is
// not supported.
//
// A Tokenizer is immutable after construction and safe for concurrent use.
package tokenizer

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// ErrUnsupported reports a vocabulary or pre-tokenizer this package does not
// implement.
var ErrUnsupported = errors.New("tokenizer: unsupported")

// ErrBadVocab reports vocabulary metadata that cannot be used.
var ErrBadVocab = errors.New("tokenizer: bad vocabulary")

// Kind is the tokenization algorithm.
type Kind int

const (
	SPM Kind = iota + 1 // SentencePiece BPE over piece scores, byte fallback
	BPE                 // GPT-2 byte-level BPE with ranked merges
	WPM                 // WordPiece (BERT)
	UGM                 // SentencePiece Unigram (T5, XLM-RoBERTa)
)

func (k Kind) String() string {
	switch k {
	case SPM:
		return "SPM"
	case BPE:
		return "BPE"
	case WPM:
		return "WPM"
	case UGM:
		return "UGM"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Token types as stored in tokenizer.ggml.token_type.
const (
	TypeUndefined   = 0
	TypeNormal      = 1
	TypeUnknown     = 2
	TypeControl     = 3
	TypeUserDefined = 4
	TypeUnused      = 5
	TypeByte        = 6
)

// Token attributes, llama.cpp's llama_token_attr bits.
const (
	attrUndefined   uint16 = 0
	attrUnknown     uint16 = 1 << 0
	attrUnused      uint16 = 1 << 1
	attrNormal      uint16 = 1 << 2
	attrControl     uint16 = 1 << 3
	attrUserDefined uint16 = 1 << 4
	attrByte        uint16 = 1 << 5
	attrLStrip      uint16 = 1 << 7
	attrRStrip      uint16 = 1 << 8
)

// Vocab is the tokenizer part of a model's metadata, as the tokenizer.ggml.*
// keys hold it. FromGGUF fills it from a file; tests may build one directly.
type Vocab struct {
	Model  string   // tokenizer.ggml.model: "llama", "gpt2", "bert", "t5", "gemma4" or "whitespace"
	Pre    string   // tokenizer.ggml.pre (gpt2 only)
	Name   string   // general.name; llama.cpp special-cases Phi-3 by it
	Tokens []string // tokenizer.ggml.tokens
	Scores []float32
	Types  []int32  // tokenizer.ggml.token_type; nil means all normal
	Merges []string // tokenizer.ggml.merges, "left right", in rank order
	// Special token ids by key suffix ("bos", "eos", "eot", "eom", "unknown",
	// "seperator", "padding", "mask", "fim_pre", ...), as the
	// tokenizer.ggml.<suffix>_token_id keys give them.
	Special                        map[string]int64
	AddBOS, AddEOS, AddSpacePrefix *bool // nil: the model type's default
	// AddSep is tokenizer.ggml.add_sep_token; nil: the default of the
	// model type and pre-tokenizer.
	AddSep *bool
	// Unigram ("t5") only: tokenizer.ggml.remove_extra_whitespaces and
	// tokenizer.ggml.precompiled_charsmap.
	RemoveExtraWhitespaces *bool
	Charsmap               []byte
	// The BERT normalizer's options (WordPiece, and the whitespace
	// tokenizer's lowercasing): tokenizer.ggml.normalizer.lowercase and
	// .strip_accents; nil: the defaults (lowercase except for the
	// whitespace pre-tokenizer; strip accents where lowercasing).
	Lowercase, StripAccents *bool

	// Packed tokens and merges, which FromGGUF gives instead of Tokens and
	// Merges.
	packedTokens, packedMerges *strs
}

// Tokenizer encodes and decodes text for one vocabulary.
type Tokenizer struct {
	kind Kind
	pre  preType

	text   strs // raw token text, by id
	scores []float32
	attrs  []uint16
	ids    *idTable

	// BPE: merges by (left id, right id) -> rank<<32 | result id.
	merges *pairTable
	// byteTok[b] is the id of the single-byte piece for byte b: for BPE the
	// byte-level character of b, for SPM the <0xXX> token (or the raw byte).
	byteTok [256]int32
	// rawByteTok[b] is the id of the one-byte string b (BPE fallback).
	rawByteTok [256]int32

	maxTokenLen  int
	special      []int32  // control, user-defined and unknown tokens, longest first
	pieceData    []byte   // rendered pieces, concatenated
	pieceOff     []uint32 // piece of id is pieceData[pieceOff[id]:pieceOff[id+1]]
	eog          map[int32]bool
	ignoreMerges bool
	cleanSpaces  bool
	// spmBPE: SentencePiece-style BPE (Gemma 4): spaces become "▁" before
	// merging, the merges run on UTF-8 characters rather than byte-level
	// ones, bytes without a token fall back to <0xXX> tokens, and pieces
	// decode as SentencePiece's.
	spmBPE bool
	// rawBPE: the merges run on UTF-8 characters and bytes without a token
	// fall back to <0xXX> tokens (no byte-level spelling): SentencePiece-
	// style BPE and the whitespace tokenizer (jina-embeddings-v2-base-zh).
	rawBPE bool
	// splitSpaces: the whitespace tokenizer's session, which cuts the text
	// at whitespace, drops it, and merges each run of the rest alone.
	splitSpaces bool
	// lowercase and stripAccents are the BERT normalizer's options:
	// WordPiece applies both, the whitespace tokenizer lowercase.
	lowercase, stripAccents bool
	// spmCutSafe: no token holds "▁" after anything but another "▁", so
	// SentencePiece text can be merged in pieces cut before a "▁" that
	// follows another character (see encodeSPMPieces).
	spmCutSafe bool
	ugm        *ugm // Unigram only

	addBOS, addEOS, addSpacePrefix bool
	addSep                         bool // a pair is joined with SEP (Model.RerankTokens)

	bos, eos, eot, eom, unk, sep, pad, mask int32
	fimPre, fimSuf, fimMid, fimPad, fimRep  int32
	fimSep, nl                              int32

	pool sync.Pool // *scratch
}

// scratch holds the buffers of one Encode call, reused across calls.
type scratch struct {
	frags  []fragment
	frags2 []fragment
	buf    []byte
	cpts   []rune
	cpts2  []rune
	segs   []int32
	segs2  []int32
	syms   []symbol
	heap   []bigram
	spans  []int32  // SPM: symbol lengths at each symbol's first and last byte
	keys   []uint64 // SPM: queue of candidate merges
	word   []byte
	pairs  *[1 << 16 / 64]uint64 // byte pairs present in the text
	ugm    []ugmBest             // Unigram: best segmentation of each prefix
}

// New builds a tokenizer from vocabulary metadata.
func New(v *Vocab) (*Tokenizer, error) {
	t := &Tokenizer{
		bos: -1, eos: -1, eot: -1, eom: -1, unk: -1, sep: -1, pad: -1, mask: -1,
		fimPre: -1, fimSuf: -1, fimMid: -1, fimPad: -1, fimRep: -1, fimSep: -1, nl: -1,
		lowercase: true,
	}
	toks := v.packedTokens
	if v.Tokens != nil || toks == nil {
		p, err := packStrings(v.Tokens)
		if err != nil {
			return nil, err
		}
		toks = &p
	}
	n := toks.len()
	if n == 0 {
		return nil, fmt.Errorf("%w: no tokens", ErrBadVocab)
	}
	if n > 1<<31-1 {
		return nil, fmt.Errorf("%w: %d tokens", ErrBadVocab, n)
	}
	if v.Scores != nil && len(v.Scores) != n {
		return nil, fmt.Errorf("%w: %d scores for %d tokens", ErrBadVocab, len(v.Scores), n)
	}
	if v.Types != nil && len(v.Types) != n {
		return nil, fmt.Errorf("%w: %d token types for %d tokens", ErrBadVocab, len(v.Types), n)
	}

	// Defaults per model type, as llama.cpp's llama_vocab::impl::load.
	switch v.Model {
	case "llama":
		t.kind = SPM
		t.bos, t.eos, t.unk = 1, 2, 0
		t.addSpacePrefix, t.addBOS = true, true
	case "bert":
		t.kind = WPM
		t.bos, t.unk, t.sep, t.pad, t.mask = 101, 100, 102, 0, 103
		t.cleanSpaces, t.addBOS, t.addSep = true, true, true
	case "gpt2", "gemma4", "whitespace":
		t.kind = BPE
		t.bos, t.eos = 11, 11
		t.cleanSpaces = true
		t.splitSpaces = v.Model == "whitespace"
		pre := v.Pre
		if v.Model == "gemma4" {
			// llama.cpp's gemma4 model: no default specials, its own
			// pre-tokenizer whatever tokenizer.ggml.pre says.
			t.bos, t.eos, pre = -1, -1, "gemma4"
		}
		p, ok := lookupPre(pre)
		if !ok {
			return nil, fmt.Errorf("%w: pre-tokenizer %q", ErrUnsupported, v.Pre)
		}
		t.spmBPE = p.spmBPE
		t.rawBPE = p.spmBPE || p.rawBPE
		t.pre = p.typ
		if p.noClean {
			t.cleanSpaces = false
		}
		if p.ignoreMerges {
			t.ignoreMerges = true
		}
		if p.addBOS {
			t.addBOS = true
		}
		if p.noBOS {
			t.bos = -1
		}
		t.addSep = p.addSep
		if p.noLowercase {
			t.lowercase = false
		}
	case "t5":
		t.kind = UGM
		t.eos, t.unk, t.pad = 1, 2, 0
		t.addEOS = true
	case "":
		return nil, fmt.Errorf("%w: no tokenizer model", ErrBadVocab)
	default:
		return nil, fmt.Errorf("%w: tokenizer model %q", ErrUnsupported, v.Model)
	}
	if v.AddSpacePrefix != nil {
		t.addSpacePrefix = *v.AddSpacePrefix
	}
	// llama.cpp's normalizer options: the key or the default, then strip
	// accents as lowercase unless its own key says otherwise.
	if v.Lowercase != nil {
		t.lowercase = *v.Lowercase
	}
	t.stripAccents = t.lowercase
	if v.StripAccents != nil {
		t.stripAccents = *v.StripAccents
	}

	t.buildTokens(v, toks)

	if t.kind == BPE {
		merges := v.packedMerges
		if v.Merges != nil || merges == nil {
			p, err := packStrings(v.Merges)
			if err != nil {
				return nil, err
			}
			merges = &p
		}
		t.buildMerges(merges)
	}
	for b := 0; b < 256; b++ {
		t.rawByteTok[b] = t.lookup(string([]byte{byte(b)}))
		switch {
		case t.kind == SPM, t.rawBPE:
			id := t.lookup(fmt.Sprintf("<0x%02X>", b))
			if id < 0 && !t.rawBPE {
				id = t.rawByteTok[b]
			}
			t.byteTok[b] = id
		default:
			var tmp [4]byte
			t.byteTok[b] = t.lookup(string(appendUTF8(tmp[:0], byteLevel[b])))
		}
	}

	t.setSpecialIDs(v)
	// Defaults can lie outside small vocabularies: no such token then.
	for _, k := range specialKeys {
		if p := t.specialField(k); *p >= int32(n) {
			*p = -1
		}
	}
	if v.AddBOS != nil {
		t.addBOS = *v.AddBOS
	}
	if t.pre == preGemma4 {
		t.addBOS = true // llama.cpp overrides add_bos_token = false for Gemma 4
	}
	if v.AddEOS != nil {
		t.addEOS = *v.AddEOS
	}
	if v.AddSep != nil {
		t.addSep = *v.AddSep
	}
	t.findEOG()

	// Special tokens that tokenizer_st_partition looks for, longest first.
	// llama.cpp's std::sort leaves equal lengths in unspecified order; ties go
	// by id here so the result is deterministic.
	for id := range t.attrs {
		if t.attrs[id]&(attrControl|attrUserDefined|attrUnknown) != 0 {
			t.special = append(t.special, int32(id))
		}
	}
	sort.SliceStable(t.special, func(i, j int) bool {
		return len(t.Token(t.special[i])) > len(t.Token(t.special[j]))
	})

	// Jina v2 strips spaces before <mask>, Phi-3 after its special tokens
	// (llama.cpp keys these on the pre-tokenizer and the model name).
	name := strings.ToLower(v.Name)
	if strings.Contains(v.Pre, "jina-v2-de") || strings.Contains(v.Pre, "jina-v2-es") || strings.Contains(v.Pre, "jina-v2-code") {
		if id := t.lookup("<mask>"); id >= 0 {
			t.attrs[id] |= attrLStrip
		}
	} else if strings.Contains(name, "phi-3") || strings.Contains(name, "phi3") {
		for _, id := range t.special {
			t.attrs[id] |= attrRStrip
		}
		for _, s := range []string{"</s>"} {
			if id := t.lookup(s); id >= 0 {
				t.attrs[id] |= attrRStrip
			}
		}
		for _, s := range []string{"<unk>", "<s>", "<|endoftext|>"} {
			if id := t.lookup(s); id >= 0 {
				t.attrs[id] &^= attrRStrip
			}
		}
	}

	t.buildPieces()
	if t.kind == UGM {
		if err := t.buildUGM(v); err != nil {
			return nil, err
		}
	}
	switch t.kind {
	case SPM:
		t.nl = t.byteTok['\n']
		t.spmCutSafe = spmCutSafe(&t.text)
	case WPM:
		t.nl = t.pad
	default:
		if ids, err := t.Encode("\n", false, false); err == nil && len(ids) > 0 {
			t.nl = ids[0]
		} else {
			t.nl = t.pad
		}
	}
	return t, nil
}

func (t *Tokenizer) buildTokens(v *Vocab, toks *strs) {
	n := toks.len()
	t.text = *toks
	t.attrs = make([]uint16, n)
	t.scores = make([]float32, n)
	if v.Scores != nil {
		copy(t.scores, v.Scores)
	}
	for i := 0; i < n; i++ {
		if toks.at(i) == "" {
			// llama.cpp names empty tokens; repack with the names.
			list := toks.unpack()
			for j, s := range list {
				if s == "" {
					list[j] = fmt.Sprintf("[EMPTY_%d]", j)
				}
			}
			t.text, _ = packStrings(list) // longer by a few bytes only
			break
		}
	}
	for i := 0; i < n; i++ {
		s := t.text.at(i)
		if len(s) > t.maxTokenLen {
			t.maxTokenLen = len(s)
		}
		a := attrNormal
		if v.Types != nil {
			switch v.Types[i] {
			case TypeUnknown:
				a = attrUnknown
			case TypeUnused:
				a = attrUnused
			case TypeNormal:
				a = attrNormal
			case TypeControl:
				a = attrControl
			case TypeUserDefined:
				a = attrUserDefined
			case TypeByte:
				a = attrByte
			default:
				a = attrUndefined
			}
		}
		t.attrs[i] = a
	}
	t.ids = newIDTable(&t.text)
}

// buildMerges indexes the merge list by the ids of its two sides, so merging
// works on ids rather than strings. llama.cpp matches merges by text, which
// differs only for merges whose sides or result are not tokens: it could
// apply those to spans that are not tokens, here such spans merge no
// further. Every merge of the test vocabularies joins two tokens into a
// token. Entries without a separating space take a rank but match nothing,
// as in llama.cpp.
func (t *Tokenizer) buildMerges(merges *strs) {
	n := 0
	prev := uint32(0)
	for _, e := range merges.ends {
		if e != prev {
			n++
		}
		prev = e
	}
	t.merges = newPairTable(n)
	total := merges.len()
	if total < parallelMerges {
		t.resolveMerges(merges, 0, total, func(key, val uint64) { t.merges.add(key, val) })
		return
	}
	// Resolving a merge's ids (hash lookups that mostly miss the cache)
	// is most of the work: the second half resolves on its own goroutine
	// while the first half goes in, then its pairs go in by rank, so the
	// table is the one a single pass builds.
	type pair struct{ key, val uint64 }
	mid := total / 2
	second := make([]pair, 0, total-mid)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t.resolveMerges(merges, mid, total, func(key, val uint64) { second = append(second, pair{key, val}) })
	}()
	t.resolveMerges(merges, 0, mid, func(key, val uint64) { t.merges.add(key, val) })
	<-done
	for _, p := range second {
		t.merges.add(p.key, p.val)
	}
}

// parallelMerges is the merge count from which buildMerges resolves the
// list on two goroutines.
const parallelMerges = 1 << 16

// resolveMerges calls add with the pair key and the rank and result of
// every merge of ranks [lo, hi) whose sides are tokens, in rank order. It
// only reads the tokenizer.
func (t *Tokenizer) resolveMerges(merges *strs, lo, hi int, add func(key, val uint64)) {
	var buf []byte
	guess := int32(-2)
	for rank := lo; rank < hi; rank++ {
		m := merges.at(rank)
		if len(m) < 2 {
			continue
		}
		p := strings.IndexByte(m[1:], ' ')
		if p < 0 {
			continue
		}
		p++
		l, r := t.ids.get(m[:p]), t.ids.get(m[p+1:])
		if l < 0 || r < 0 {
			continue
		}
		// Vocabularies usually list merge results in merge order: try the
		// token after the previous result before hashing.
		var res int32
		if g := guess + 1; g >= 0 && int(g) < t.text.len() && isConcat(t.text.at(int(g)), m[:p], m[p+1:]) {
			res = g
		} else {
			buf = append(append(buf[:0], m[:p]...), m[p+1:]...)
			res = t.ids.getBytes(buf)
		}
		guess = res
		add(pairKey(l, r), uint64(rank)<<32|uint64(uint32(res)))
	}
}

func isConcat(s, a, b string) bool {
	return len(s) == len(a)+len(b) && s[:len(a)] == a && s[len(a):] == b
}

// specialKeys lists the special-token keys llama.cpp reads, in its order.
var specialKeys = []string{
	"bos", "eos", "eot", "eom", "unknown", "seperator", "padding", "mask",
	"fim_pre", "fim_suf", "fim_mid", "fim_pad", "fim_rep", "fim_sep",
	"prefix", "suffix", "middle",
}

func (t *Tokenizer) specialField(key string) *int32 {
	switch key {
	case "bos":
		return &t.bos
	case "eos":
		return &t.eos
	case "eot":
		return &t.eot
	case "eom":
		return &t.eom
	case "unknown":
		return &t.unk
	case "seperator":
		return &t.sep
	case "padding":
		return &t.pad
	case "mask":
		return &t.mask
	case "fim_pre", "prefix":
		return &t.fimPre
	case "fim_suf", "suffix":
		return &t.fimSuf
	case "fim_mid", "middle":
		return &t.fimMid
	case "fim_pad":
		return &t.fimPad
	case "fim_rep":
		return &t.fimRep
	case "fim_sep":
		return &t.fimSep
	}
	return nil
}

func (t *Tokenizer) setSpecialIDs(v *Vocab) {
	for _, k := range specialKeys {
		id, ok := v.Special[k]
		if !ok {
			continue
		}
		// Out-of-range ids (like 0xFFFFFFFF for "none") keep the default.
		if id < 0 || id >= int64(t.text.len()) {
			continue
		}
		*t.specialField(k) = int32(id)
	}

	// Guess unset end-of-turn and fill-in-the-middle tokens from their text,
	// forcing them to control type, as llama.cpp does. llama.cpp walks a hash
	// map, so when a vocabulary holds several candidates its choice is
	// arbitrary; here the first candidate listed wins.
	guess := func(field *int32, names ...string) {
		if *field >= 0 {
			return
		}
		for _, s := range names {
			if id := t.lookup(s); id >= 0 {
				*field = id
				t.attrs[id] = t.forceControl(id)
				return
			}
		}
	}
	guess(&t.eot, "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>", "<｜end▁of▁sentence｜>")
	guess(&t.eom, "<|eom_id|>")
	guess(&t.fimPre, "<|fim_prefix|>", "<fim-prefix>", "<｜fim▁begin｜>", "<PRE>")
	guess(&t.fimSuf, "<|fim_suffix|>", "<fim-suffix>", "<｜fim▁hole｜>", "<SUF>")
	guess(&t.fimMid, "<|fim_middle|>", "<fim-middle>", "<｜fim▁end｜>", "<MID>")
	guess(&t.fimPad, "<|fim_pad|>", "<fim-pad>", "<PAD>")
	guess(&t.fimRep, "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>")
	guess(&t.fimSep, "<|file_sep|>")
}

// forceControl returns the attributes of id with the control type, which
// llama.cpp imposes on tokens it recognizes as end-of-turn or FIM markers.
func (t *Tokenizer) forceControl(id int32) uint16 {
	a := t.attrs[id]
	if a&attrControl == 0 {
		return attrControl
	}
	return a
}

func (t *Tokenizer) findEOG() {
	t.eog = map[int32]bool{}
	for _, id := range []int32{t.fimPad, t.fimRep, t.fimSep} {
		if id >= 0 {
			t.eog[id] = true
		}
	}
	for _, s := range []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>",
		"<eos>", "<turn|>", "<|tool_response>"} { // the last three: Gemma 4
		if id := t.lookup(s); id >= 0 {
			t.eog[id] = true
			t.attrs[id] = t.forceControl(id)
		}
	}
	for _, id := range []int32{t.eos, t.eot, t.eom} {
		if id >= 0 {
			t.eog[id] = true
		}
	}
}

func (t *Tokenizer) lookup(s string) int32 {
	return t.ids.get(s)
}

// Kind returns the tokenization algorithm.
func (t *Tokenizer) Kind() Kind { return t.kind }

// VocabSize returns the number of tokens.
func (t *Tokenizer) VocabSize() int { return t.text.len() }

// Token returns the raw vocabulary text of id ("" if out of range).
func (t *Tokenizer) Token(id int32) string {
	if !t.valid(id) {
		return ""
	}
	return t.text.at(int(id))
}

// ID returns the id of the token whose raw text is s, or -1.
func (t *Tokenizer) ID(s string) int32 { return t.lookup(s) }

// Score returns the score of id (0 if out of range or absent).
func (t *Tokenizer) Score(id int32) float32 {
	if !t.valid(id) {
		return 0
	}
	return t.scores[id]
}

// Type returns the token type of id (TypeNormal, TypeControl, ...), after
// llama.cpp's overrides, or TypeUndefined if out of range.
func (t *Tokenizer) Type(id int32) int {
	if !t.valid(id) {
		return TypeUndefined
	}
	a := t.attrs[id]
	switch {
	case a&attrUnknown != 0:
		return TypeUnknown
	case a&attrUnused != 0:
		return TypeUnused
	case a&attrNormal != 0:
		return TypeNormal
	case a&attrControl != 0:
		return TypeControl
	case a&attrUserDefined != 0:
		return TypeUserDefined
	case a&attrByte != 0:
		return TypeByte
	}
	return TypeUndefined
}

func (t *Tokenizer) valid(id int32) bool { return id >= 0 && int(id) < t.text.len() }

// Special token ids; -1 when the vocabulary has none.
func (t *Tokenizer) BOS() int32     { return t.bos }
func (t *Tokenizer) EOS() int32     { return t.eos }
func (t *Tokenizer) EOT() int32     { return t.eot }
func (t *Tokenizer) EOM() int32     { return t.eom }
func (t *Tokenizer) UNK() int32     { return t.unk }
func (t *Tokenizer) SEP() int32     { return t.sep }
func (t *Tokenizer) PAD() int32     { return t.pad }
func (t *Tokenizer) Mask() int32    { return t.mask }
func (t *Tokenizer) Newline() int32 { return t.nl }
func (t *Tokenizer) FIMPre() int32  { return t.fimPre }
func (t *Tokenizer) FIMSuf() int32  { return t.fimSuf }
func (t *Tokenizer) FIMMid() int32  { return t.fimMid }
func (t *Tokenizer) FIMPad() int32  { return t.fimPad }
func (t *Tokenizer) FIMRep() int32  { return t.fimRep }
func (t *Tokenizer) FIMSep() int32  { return t.fimSep }

// AddBOS reports whether Encode with addSpecial prepends BOS.
func (t *Tokenizer) AddBOS() bool { return t.addBOS }

// AddEOS reports whether Encode with addSpecial appends EOS.
func (t *Tokenizer) AddEOS() bool { return t.addEOS }

// AddSep reports whether a pair of texts (a reranker's query and
// document) is joined with SEP, after the query's EOS when AddEOS; as
// llama.cpp's add_sep. WordPiece's framing already ends the query with
// SEP (Model.RerankTokens).
func (t *Tokenizer) AddSep() bool { return t.addSep }

// AddSpacePrefix reports whether a space is put before text (SentencePiece).
func (t *Tokenizer) AddSpacePrefix() bool { return t.addSpacePrefix }

// IsEOG reports whether id ends generation: EOS, EOT, EOM and the tokens
// llama.cpp recognizes by text (<|im_end|>, <end_of_turn>, <|eot_id|>,
// <|endoftext|>, <|end|>, <EOT>, FIM pad/repo/sep).
func (t *Tokenizer) IsEOG(id int32) bool { return t.eog[id] }

// EOGTokens returns the end-of-generation ids, ascending.
func (t *Tokenizer) EOGTokens() []int32 {
	out := make([]int32, 0, len(t.eog))
	for id := range t.eog {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// IsControl reports whether id is a control token (not rendered by Decode).
func (t *Tokenizer) IsControl(id int32) bool {
	return t.valid(id) && t.attrs[id]&attrControl != 0
}

// IsSpecial reports whether id is a control, user-defined or unknown token:
// the tokens Encode can find in text when parsing special tokens.
func (t *Tokenizer) IsSpecial(id int32) bool {
	return t.valid(id) && t.attrs[id]&(attrControl|attrUserDefined|attrUnknown) != 0
}
