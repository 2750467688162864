package tokenizer

// Pre-tokenizers split text into words before BPE. llama.cpp describes each
// by a list of regular expressions applied in turn, each splitting every
// piece left by the previous one into its matches and the gaps between them.
// Two expressions (GPT-2's and Llama 3's) have hand-written matchers there;
// the others run through std::regex on a "collapsed" text where each non-ASCII
// code point is replaced by one byte naming its category, or through
// std::wregex. The scanners below reproduce those results, including the
// collapsed classes' ASCII tables (where, for instance, '~' is in neither
// \p{P} nor \p{S}).

type preType int

const (
	preDefault preType = iota
	preLlama3
	preDeepseekLLM
	preDeepseekCoder
	preFalcon
	preStarcoder // also refact, command-r, smollm, codeshell, exaone, minerva
	preGPT2      // also mpt, olmo, jais
	preQwen2     // also stablelm2, deepseek-r1-qwen, megrez
	prePoro      // also bloom, gpt3-finnish
	preViking
	preDeepseekV3
	preTekken
	preChameleon
	preGPT4o  // also llama4
	preGemma4 // lines and runs of newlines; also granite-embed-multi-311m
	preQwen35
	preWhitespace // \S+ (jina-embeddings-v2-base-zh)
)

type preInfo struct {
	typ          preType
	noClean      bool // clean_spaces off
	ignoreMerges bool
	addBOS       bool
	noBOS        bool
	spmBPE       bool // SentencePiece-style BPE (Tokenizer.spmBPE)
	addSep       bool // add_sep on (a pair is joined with SEP)
	rawBPE       bool // merges on UTF-8 characters (Tokenizer.rawBPE)
	noLowercase  bool // the normalizer does not lowercase by default
}

// lookupPre maps tokenizer.ggml.pre to the pre-tokenizer and the options
// llama.cpp attaches to it.
func lookupPre(name string) (preInfo, bool) {
	switch name {
	case "", "default":
		return preInfo{typ: preDefault}, true
	case "llama3", "llama-v3", "llama-bpe", "falcon3":
		return preInfo{typ: preLlama3, ignoreMerges: true, addBOS: true}, true
	case "dbrx", "smaug-bpe":
		return preInfo{typ: preLlama3}, true
	case "deepseek-llm":
		return preInfo{typ: preDeepseekLLM, noClean: true}, true
	case "deepseek-coder":
		return preInfo{typ: preDeepseekCoder, noClean: true}, true
	case "falcon":
		return preInfo{typ: preFalcon}, true
	case "mpt", "olmo", "jais":
		return preInfo{typ: preGPT2}, true
	case "starcoder", "refact", "codeshell", "exaone", "minerva-7b":
		return preInfo{typ: preStarcoder}, true
	case "command-r", "smollm":
		return preInfo{typ: preStarcoder, noClean: true}, true
	case "gpt-2", "phi-2", "jina-es", "jina-de", "gigachat",
		"jina-v2-es", "jina-v2-de", "exaone4":
		return preInfo{typ: preGPT2}, true
	case "jina-v1-en", "jina-v2-code", "roberta-bpe":
		return preInfo{typ: preGPT2, addSep: true}, true
	case "qwen2", "deepseek-r1-qwen":
		return preInfo{typ: preQwen2, noClean: true}, true
	case "qwen35":
		return preInfo{typ: preQwen35, noClean: true}, true
	case "stablelm2", "megrez":
		return preInfo{typ: preQwen2}, true
	case "chatglm-bpe":
		return preInfo{typ: preLlama3, noBOS: true}, true
	case "poro-chat":
		return preInfo{typ: prePoro, noClean: true}, true
	case "bloom", "gpt3-finnish":
		return preInfo{typ: prePoro}, true
	case "viking":
		return preInfo{typ: preViking, noClean: true}, true
	case "deepseek-v3":
		return preInfo{typ: preDeepseekV3, noClean: true}, true
	case "tekken":
		return preInfo{typ: preTekken, noClean: true, ignoreMerges: true, addBOS: true}, true
	case "chameleon":
		return preInfo{typ: preChameleon, noClean: true, addBOS: true}, true
	case "gpt-4o", "llama4":
		return preInfo{typ: preGPT4o, noClean: true}, true
	case "gemma4", "granite-embed-multi-311m":
		return preInfo{typ: preGemma4, spmBPE: true}, true
	case "whitespace":
		return preInfo{typ: preWhitespace, rawBPE: true, noLowercase: true}, true
	}
	return preInfo{}, false
}

// splitter is one pre-tokenizer stage. partition stages split a piece
// completely; match stages return the length of the match anchored at i
// (0 for none), and the gaps between matches become pieces of their own.
type stage struct {
	partition func(c []rune, s, e int, out []int32) []int32
	match     func(c []rune, i, s, e int) int
}

var preStages = map[preType][]stage{
	preDefault: {
		{match: matchRun(colFalconDefault)},
		{partition: splitGPT2},
		{match: matchRun(colNumber)},
		{match: matchThreeDigits},
	},
	preLlama3:        {{partition: splitLlama3}},
	preQwen2:         {{partition: splitQwen2}},
	preQwen35:        {{partition: splitQwen35}},
	preGPT2:          {{partition: splitGPT2}},
	preStarcoder:     {{match: matchOne(colNumber)}, {partition: splitGPT2}},
	preFalcon:        {{match: matchRun(colFalcon)}, {partition: splitGPT2}, {match: matchThreeDigits}},
	preDeepseekLLM:   {{match: matchOne(isCRLF)}, {match: matchSpaceOptRun(wDeepseekLetter)}, {match: matchSpaceOptRun(wDeepseekPunct)}, {match: matchTrailingSpace}, {match: matchRun(wCJK)}, {match: matchRun(colNumber)}},
	preDeepseekCoder: {{match: matchOne(isCRLF)}, {match: matchSpaceOptRun(colLetter)}, {match: matchSpaceOptRun(colPunct)}, {match: matchRun(wCJK)}, {match: matchOne(colNumber)}},
	prePoro:          {{match: matchPoro}},
	preViking:        {{match: matchPoro}, {match: matchOne(colNumber)}},
	preDeepseekV3:    {{match: matchNumber3}, {match: matchRun(wKana)}, {match: matchDeepseekV3}},
	preTekken:        {{match: matchTekken}},
	preGPT4o:         {{match: matchGPT4o}},
	preGemma4:        {{match: matchRun(func(r rune) bool { return r != '\n' })}}, // [^\n]+|[\n]+
	preWhitespace:    {{match: matchRun(func(r rune) bool { return !isWS(r) })}},  // \S+
	preChameleon: {
		{match: matchSentinel}, {match: matchImage}, {match: matchChameleonSpace},
		{match: matchOne(colNumber)}, {match: matchOne(colChameleonPunct)}, {partition: splitGPT2},
	},
}

// preSplit splits cpts into words, returning their lengths in code points.
func preSplit(p preType, cpts []rune, segs, tmp []int32) ([]int32, []int32) {
	segs = append(segs[:0], int32(len(cpts)))
	if len(cpts) == 0 {
		return segs[:0], tmp
	}
	for _, st := range preStages[p] {
		tmp = tmp[:0]
		s := 0
		for _, n := range segs {
			e := s + int(n)
			if st.partition != nil {
				tmp = st.partition(cpts, s, e, tmp)
			} else {
				tmp = applyMatch(st.match, cpts, s, e, tmp)
			}
			s = e
		}
		segs, tmp = tmp, segs
	}
	return segs, tmp
}

// applyMatch finds the leftmost non-overlapping matches in [s,e), as
// std::regex_iterator does, emitting gaps and matches.
func applyMatch(m func(c []rune, i, s, e int) int, c []rune, s, e int, out []int32) []int32 {
	last := s
	for i := s; i < e; {
		n := m(c, i, s, e)
		if n == 0 {
			i++
			continue
		}
		if i > last {
			out = append(out, int32(i-last))
		}
		out = append(out, int32(n))
		i += n
		last = i
	}
	if last < e {
		out = append(out, int32(e-last))
	}
	return out
}

func matchRun(class func(rune) bool) func(c []rune, i, s, e int) int {
	return func(c []rune, i, s, e int) int {
		j := i
		for j < e && class(c[j]) {
			j++
		}
		return j - i
	}
}

func matchOne(class func(rune) bool) func(c []rune, i, s, e int) int {
	return func(c []rune, i, s, e int) int {
		if class(c[i]) {
			return 1
		}
		return 0
	}
}

// matchSpaceOptRun is \s?X+ where X excludes whitespace.
func matchSpaceOptRun(class func(rune) bool) func(c []rune, i, s, e int) int {
	return func(c []rune, i, s, e int) int {
		j := i
		if isWS(c[j]) && j+1 < e && class(c[j+1]) {
			j++
		}
		k := j
		for k < e && class(c[k]) {
			k++
		}
		if k == j {
			return 0
		}
		return k - i
	}
}

// matchTrailingSpace is \s+$: whitespace reaching the end of the piece.
func matchTrailingSpace(c []rune, i, s, e int) int {
	if !isWS(c[i]) || (i > s && isWS(c[i-1])) {
		// Only the start of a run can begin the leftmost match.
		return 0
	}
	j := i
	for j < e && isWS(c[j]) {
		j++
	}
	if j == e {
		return e - i
	}
	return 0
}

// matchThreeDigits is [0-9][0-9][0-9].
func matchThreeDigits(c []rune, i, s, e int) int {
	if i+3 <= e && isDigit(c[i]) && isDigit(c[i+1]) && isDigit(c[i+2]) {
		return 3
	}
	return 0
}

// matchPoro is " ?[^(\s|.,!?…。，、।۔،)]+".
func matchPoro(c []rune, i, s, e int) int {
	j := i
	if c[j] == ' ' && j+1 < e && poroWord(c[j+1]) {
		j++
	}
	k := j
	for k < e && poroWord(c[k]) {
		k++
	}
	if k == j {
		return 0
	}
	return k - i
}

func poroWord(r rune) bool {
	if isWS(r) {
		return false
	}
	switch r {
	case '(', '|', '.', ',', '!', '?', '…', '。', '，', '、', '।', '۔', '،', ')':
		return false
	}
	return true
}

func isDigit(r rune) bool { return r >= '0' && r <= '9' }
func isCRLF(r rune) bool  { return r == '\r' || r == '\n' }

// isWS is \s both in llama.cpp's custom matchers and, after its replacement
// of non-ASCII whitespace by \v, in its std::regex ones: the White_Space
// property.
func isWS(r rune) bool {
	if r < 128 {
		return r == ' ' || (r >= '\t' && r <= '\r')
	}
	return cptFlags(r)&fSpace != 0
}

// Classes of the collapsed text: ASCII by llama.cpp's tables, the rest by
// general category (whitespace first).
func colNumber(r rune) bool {
	if r < 128 {
		return isDigit(r)
	}
	f := cptFlags(r)
	return f&fSpace == 0 && f&fNumber != 0
}

func colLetter(r rune) bool {
	if r < 128 {
		return (r >= 'A' && r <= 'Z') || (r >= 'a' && r <= 'z')
	}
	f := cptFlags(r)
	return f&fSpace == 0 && f&fLetter != 0
}

// asciiPunct is llama.cpp's ASCII part of \p{P}: !-# %-* ,-/ :-; ?-@ [-] _ { }.
func asciiPunct(r rune) bool {
	switch {
	case r >= '!' && r <= '#', r >= '%' && r <= '*', r >= ',' && r <= '/',
		r >= ':' && r <= ';', r >= '?' && r <= '@', r >= '[' && r <= ']',
		r == '_', r == '{', r == '}':
		return true
	}
	return false
}

func colPunct(r rune) bool {
	if r < 128 {
		return asciiPunct(r)
	}
	f := cptFlags(r)
	return f&fSpace == 0 && f&fPunct != 0
}

// colFalconDefault is [\p{P}\$\+<=>\^~\|].
func colFalconDefault(r rune) bool {
	if r < 128 {
		switch r {
		case '$', '+', '<', '=', '>', '^', '~', '|':
			return true
		}
	}
	return colPunct(r)
}

// colFalcon is [\p{P}\$\+<=>\^~\|`].
func colFalcon(r rune) bool { return r == '`' || colFalconDefault(r) }

// wide applies std::wregex's view: non-ASCII whitespace was replaced by \v.
func wide(r rune) rune {
	if r > 0x7F && cptFlags(r)&fSpace != 0 {
		return 0x0B
	}
	return r
}

// wCJK is [一-龥ࠀ-一가-퟿].
func wCJK(r rune) bool {
	r = wide(r)
	return (r >= 0x4E00 && r <= 0x9FA5) || (r >= 0x0800 && r <= 0x4E00) || (r >= 0xAC00 && r <= 0xD7FF)
}

// wDeepseekPunct is [!-/:-~！-／：-～‘-‟　-。].
func wDeepseekPunct(r rune) bool {
	r = wide(r)
	return (r >= '!' && r <= '/') || (r >= ':' && r <= '~') || (r >= 0xFF01 && r <= 0xFF0F) ||
		(r >= 0xFF1A && r <= 0xFF5E) || (r >= 0x2018 && r <= 0x201F) || (r >= 0x3000 && r <= 0x3002)
}

// deepseekLetterRanges is the letter class of DeepSeek LLM's pre-tokenizer
// (its tokenizer.json), as pairs of inclusive bounds.
// Escaped, because several of its characters have canonical equivalents
// that editors and tools may silently substitute (Ω for Ω, K for K).
var deepseekLetterRanges = parseRanges("A-Za-z\u00B5\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u01BA\u01BC-\u01BF\u01C4-\u0293\u0295-\u02AF\u0370-\u0373\u0376\u0377\u037B-\u037D\u037F\u0386\u0388-\u038A\u038C\u038E-\u03A1\u03A3-\u03F5\u03F7-\u0481\u048A-\u052F\u0531-\u0556\u10A0-\u10C5\u13A0-\u13F5\u13F8-\u13FD\u1C90-\u1CBA\u1CBD-\u1CBF\u1D00-\u1D2B\u1D6B-\u1D77\u1D79-\u1D9A\u1E00-\u1F15\u1F18-\u1F1D\u1F20-\u1F45\u1F48-\u1F4D\u1F50-\u1F57\u1F59\u1F5B\u1F5D\u1F5F-\u1F7D\u1F80-\u1FB4\u1FB6-\u1FBC\u1FBE\u1FC2-\u1FC4\u1FC6-\u1FCC\u1FD0-\u1FD3\u1FD6-\u1FDB\u1FE0-\u1FEC\u1FF2-\u1FF4\u1FF6-\u1FFC\u2102\u2107\u210A-\u2113\u2115\u2119-\u211D\u2124\u2126\u2128\u212A-\u212D\u212F-\u2134\u2139\u213C-\u213F\u2145-\u2149\u214E\u2183\u2184\u2C00-\u2C7B\u2C7E-\u2CE4\u2CEB-\u2CEE\u2CF2\u2CF3\uA640-\uA66D\uA680-\uA69B\uA722-\uA76F\uA771-\uA787\uA78B-\uA78E\uAB70-\uABBF\uFB00-\uFB06\uFB13-\uFB17\uFF21-\uFF3A\uFF41-\uFF5A\U00010400-\U0001044F\U000104B0-\U000104D3\U000104D8-\U000104FB\U00010C80-\U00010CB2\U00010CC0-\U00010CF2\U000118A0-\U000118DF\U0001E900-\U0001E943")

func parseRanges(class string) []rune {
	rs := []rune(class)
	var out []rune
	for i := 0; i < len(rs); i++ {
		if i+2 < len(rs) && rs[i+1] == '-' {
			out = append(out, rs[i], rs[i+2])
			i += 2
		} else {
			out = append(out, rs[i], rs[i])
		}
	}
	return out
}

func wDeepseekLetter(r rune) bool {
	if r < 128 {
		return (r >= 'A' && r <= 'Z') || (r >= 'a' && r <= 'z')
	}
	r = wide(r)
	// Binary search for the last range starting at or below r.
	lo, hi := 0, len(deepseekLetterRanges)/2
	for lo < hi {
		m := (lo + hi) / 2
		if deepseekLetterRanges[2*m] <= r {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo > 0 && r <= deepseekLetterRanges[2*(lo-1)+1]
}

// splitGPT2 is llama.cpp's matcher for GPT-2's expression
// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
func splitGPT2(c []rune, s, e int, out []int32) []int32 {
	flags := func(i int) uint16 {
		if i < e {
			return cptFlags(c[i])
		}
		return 0
	}
	prev := s
	add := func(end int) {
		if end > prev {
			out = append(out, int32(end-prev))
		}
		prev = end
	}
	const other = fSpace | fLetter | fNumber
	for pos := s; pos < e; {
		r := c[pos]
		f := flags(pos)
		if r == '\'' && pos+1 < e {
			n := c[pos+1]
			if n == 's' || n == 't' || n == 'm' || n == 'd' {
				pos += 2
				add(pos)
				continue
			}
			if pos+2 < e {
				nn := c[pos+2]
				if (n == 'r' && nn == 'e') || (n == 'v' && nn == 'e') || (n == 'l' && nn == 'l') {
					pos += 3
					add(pos)
					continue
				}
			}
		}
		f2 := f
		if r == ' ' {
			f2 = flags(pos + 1)
		}
		if f2&fLetter != 0 {
			if r == ' ' {
				pos++
			}
			for flags(pos)&fLetter != 0 {
				pos++
			}
			add(pos)
			continue
		}
		if f2&fNumber != 0 {
			if r == ' ' {
				pos++
			}
			for flags(pos)&fNumber != 0 {
				pos++
			}
			add(pos)
			continue
		}
		if f2&other == 0 && f2 != 0 {
			if r == ' ' {
				pos++
			}
			for g := flags(pos); g&other == 0 && g != 0; g = flags(pos) {
				pos++
			}
			add(pos)
			continue
		}
		nws := 0
		for flags(pos+nws)&fSpace != 0 {
			nws++
		}
		if nws > 1 && pos+nws < e {
			pos += nws - 1
			add(pos)
			continue
		}
		if nws > 0 {
			pos += nws
			add(pos)
			continue
		}
		pos++
		add(pos)
	}
	return out
}

func splitLlama3(c []rune, s, e int, out []int32) []int32 {
	return splitLlama3Like(c, s, e, out, 3, fLetter)
}
func splitQwen2(c []rune, s, e int, out []int32) []int32 {
	return splitLlama3Like(c, s, e, out, 1, fLetter)
}

// splitQwen35 is Qwen3.5's expression: Qwen2's with combining marks
// (\p{M}) taken as letters, [\p{L}\p{M}]+ for \p{L}+.
func splitQwen35(c []rune, s, e int, out []int32) []int32 {
	return splitLlama3Like(c, s, e, out, 1, fLetter|fMark)
}

// splitLlama3Like matches Llama 3's expression
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,maxDigits}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// as llama.cpp's custom matcher does (maxDigits 3); Qwen2's expression is the
// same with single digits, which llama.cpp runs through std::regex with the
// same result. letters is the letter class (\p{L}, or with Qwen3.5 also
// \p{M}).
func splitLlama3Like(c []rune, s, e int, out []int32, maxDigits int, letters uint16) []int32 {
	flags := func(i int) uint16 {
		if i < e {
			return cptFlags(c[i])
		}
		return 0
	}
	lower := func(i int) rune {
		r := c[i]
		if r >= 'A' && r <= 'Z' {
			r += 'a' - 'A'
		}
		return r
	}
	prev := s
	add := func(end int) {
		if end > prev {
			out = append(out, int32(end-prev))
		}
		prev = end
	}
	other := fSpace | letters | fNumber
	for pos := s; pos < e; {
		r := c[pos]
		f := flags(pos)
		if r == '\'' && pos+1 < e {
			n := lower(pos + 1)
			if n == 's' || n == 't' || n == 'm' || n == 'd' {
				pos += 2
				add(pos)
				continue
			}
			if pos+2 < e {
				nn := lower(pos + 2)
				if (n == 'r' && nn == 'e') || (n == 'v' && nn == 'e') || (n == 'l' && nn == 'l') {
					pos += 3
					add(pos)
					continue
				}
			}
		}
		if !(r == '\r' || r == '\n' || f&fNumber != 0) {
			if f&letters != 0 || flags(pos+1)&letters != 0 {
				pos++
				for flags(pos)&letters != 0 {
					pos++
				}
				add(pos)
				continue
			}
		}
		if f&fNumber != 0 {
			ini := pos
			for flags(pos)&fNumber != 0 {
				pos++
				if pos-ini >= maxDigits {
					add(pos)
					ini = pos
				}
			}
			add(pos)
			continue
		}
		f2 := f
		if r == ' ' {
			f2 = flags(pos + 1)
		}
		if f2&other == 0 && f != 0 {
			if r == ' ' {
				pos++
			}
			for g := flags(pos); g&other == 0 && g != 0; g = flags(pos) {
				pos++
			}
			for pos < e && (c[pos] == '\r' || c[pos] == '\n') {
				pos++
			}
			add(pos)
			continue
		}
		nws, lastNL := 0, 0
		for flags(pos+nws)&fSpace != 0 {
			if r2 := c[pos+nws]; r2 == '\r' || r2 == '\n' {
				lastNL = pos + nws + 1
			}
			nws++
		}
		if lastNL > 0 {
			pos = lastNL
			add(pos)
			continue
		}
		if nws > 1 && pos+nws < e {
			pos += nws - 1
			add(pos)
			continue
		}
		if nws > 0 {
			pos += nws
			add(pos)
			continue
		}
		pos++
		add(pos)
	}
	return out
}

// col is a code point as llama.cpp's collapsed text has it: ASCII as is,
// others as one byte per category (whitespace first).
func col(r rune) byte {
	if r >= 0 && r < 128 {
		return byte(r)
	}
	f := cptFlags(r)
	switch {
	case f&fSpace != 0:
		return 0x0B
	case f&fNumber != 0:
		return 0xD1
	case f&fLetter != 0:
		return 0xD2
	case f&fPunct != 0:
		return 0xD3
	case f&fMark != 0:
		return 0xD4
	case f&fSymbol != 0:
		return 0xD5
	}
	return 0xD0
}

// Classes of collapsed bytes, as llama.cpp rewrites \p{..} for std::regex.
func cL(c byte) bool  { return c == 0xD2 || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') }
func cN(c byte) bool  { return c == 0xD1 || (c >= '0' && c <= '9') }
func cP(c byte) bool  { return c == 0xD3 || (c < 128 && asciiPunct(rune(c))) }
func cM(c byte) bool  { return c == 0xD4 }
func cWS(c byte) bool { return c == ' ' || (c >= '\t' && c <= '\r') }
func cS(c byte) bool {
	switch c {
	case 0xD5, '$', '+', '<', '=', '>', '^', '`', '|':
		return true
	}
	return false
}

// colAt returns the collapsed byte at i, or 0 (no class) outside [s,e).
func colAt(c []rune, i, e int) byte {
	if i >= e {
		return 0
	}
	return col(c[i])
}

// matchNumber3 is \p{N}{1,3}.
func matchNumber3(c []rune, i, s, e int) int {
	j := i
	for j < e && j-i < 3 && cN(col(c[j])) {
		j++
	}
	return j - i
}

// wKana is [一-龥぀-ゟ゠-ヿ].
func wKana(r rune) bool {
	r = wide(r)
	return (r >= 0x4E00 && r <= 0x9FA5) || (r >= 0x3040 && r <= 0x309F) || (r >= 0x30A0 && r <= 0x30FF)
}

// runOf returns the end of the run of class from j.
func runOf(c []rune, j, e int, class func(byte) bool) int {
	for j < e && class(col(c[j])) {
		j++
	}
	return j
}

// matchSpaces is \s*[\r\n]+|\s+(?!\S)|\s+ at i, 0 if c[i] is not
// whitespace.
func matchSpaces(c []rune, i, e int) int {
	j, lastNL := i, -1
	for j < e && cWS(col(c[j])) {
		if c[j] == '\r' || c[j] == '\n' {
			lastNL = j
		}
		j++
	}
	switch {
	case j == i:
		return 0
	case lastNL >= 0:
		return lastNL + 1 - i
	case j < e && j-i > 1:
		return j - 1 - i
	}
	return j - i
}

// matchDeepseekV3 is DeepSeek V3's third expression:
// [!-/:-@[-`{-~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
func matchDeepseekV3(c []rune, i, s, e int) int {
	c0, c1 := col(c[i]), colAt(c, i+1, e)
	asciiLetter := func(b byte) bool { return (b >= 'A' && b <= 'Z') || (b >= 'a' && b <= 'z') }
	if (c0 >= '!' && c0 <= '/') || (c0 >= ':' && c0 <= '@') || (c0 >= '[' && c0 <= '`') || (c0 >= '{' && c0 <= '~') {
		if asciiLetter(c1) {
			return runOf(c, i+1, e, asciiLetter) - i
		}
	}
	lm := func(b byte) bool { return cL(b) || cM(b) }
	x := c0 != '\r' && c0 != '\n' && !cL(c0) && !cP(c0) && !cS(c0)
	if x && lm(c1) {
		return runOf(c, i+1, e, lm) - i
	}
	if lm(c0) {
		return runOf(c, i, e, lm) - i
	}
	ps := func(b byte) bool { return cP(b) || cS(b) }
	j := i
	if c0 == ' ' && ps(c1) {
		j++
	}
	if ps(colAt(c, j, e)) {
		j = runOf(c, j, e, ps)
		for j < e && (c[j] == '\r' || c[j] == '\n') {
			j++
		}
		return j - i
	}
	return matchSpaces(c, i, e)
}

// matchTekken is Mistral's Tekken expression as llama.cpp rewrites it:
// [^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|
// [^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|
// \p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
// A letter "not a-z" is A-Z or any non-ASCII letter; "not A-Z" is a-z or
// any non-ASCII letter.
func matchTekken(c []rune, i, s, e int) int {
	up := func(b byte) bool { return b == 0xD2 || (b >= 'A' && b <= 'Z') }
	lo := func(b byte) bool { return b == 0xD2 || (b >= 'a' && b <= 'z') }
	c0 := col(c[i])
	x := c0 != '\r' && c0 != '\n' && !cL(c0) && !cN(c0)
	// U*Lo+: the longest run of U that still leaves a Lo after it.
	upLo := func(j int) int {
		u := runOf(c, j, e, up)
		for k := u; k >= j; k-- {
			if k < e && lo(col(c[k])) {
				return runOf(c, k, e, lo)
			}
		}
		return -1
	}
	upThenLo := func(j int) int {
		u := runOf(c, j, e, up)
		if u == j {
			return -1
		}
		return runOf(c, u, e, lo)
	}
	for _, alt := range [2]func(int) int{upLo, upThenLo} {
		if x && i+1 < e {
			if end := alt(i + 1); end >= 0 {
				return end - i
			}
		}
		if end := alt(i); end >= 0 {
			return end - i
		}
	}
	if cN(c0) {
		return 1
	}
	other := func(b byte) bool { return !cWS(b) && !cL(b) && !cN(b) }
	j := i
	if c0 == ' ' && i+1 < e && other(col(c[i+1])) {
		j++
	}
	if j < e && other(col(c[j])) {
		j = runOf(c, j, e, other)
		for j < e && (c[j] == '\r' || c[j] == '\n' || c[j] == '/') {
			j++
		}
		return j - i
	}
	return matchSpaces(c, i, e)
}

// matchSentinel is <sentinel:[0-9]+>.
func matchSentinel(c []rune, i, s, e int) int {
	const lit = "<sentinel:"
	j := i
	for _, r := range lit {
		if j >= e || c[j] != r {
			return 0
		}
		j++
	}
	k := j
	for k < e && isDigit(c[k]) {
		k++
	}
	if k == j || k >= e || c[k] != '>' {
		return 0
	}
	return k + 1 - i
}

// matchImage is (IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z.
func matchImage(c []rune, i, s, e int) int {
	const lit = "IMGIMG"
	j := i
	for _, r := range lit {
		if j >= e || c[j] != r {
			return 0
		}
		j++
	}
	k := j
	for k < e && k-j < 4 && c[k] >= 'A' && c[k] <= 'I' {
		k++
	}
	if k == j || k >= e || c[k] != 'Z' {
		return 0
	}
	return k + 1 - i
}

// matchChameleonSpace is ([\t\n]|    |  ).
func matchChameleonSpace(c []rune, i, s, e int) int {
	if c[i] == '\t' || c[i] == '\n' {
		return 1
	}
	n := 0
	for i+n < e && n < 4 && c[i+n] == ' ' {
		n++
	}
	switch {
	case n == 4:
		return 4
	case n >= 2:
		return 2
	}
	return 0
}

// colChameleonPunct is [\p{P}!-/:-@\[-`{-~].
func colChameleonPunct(r rune) bool {
	if r < 128 {
		return (r >= '!' && r <= '/') || (r >= ':' && r <= '@') || (r >= '[' && r <= '`') || (r >= '{' && r <= '~')
	}
	return cP(col(r))
}

// matchGPT4o is GPT-4o's expression (Phi-4-mini, Llama 4) as llama.cpp
// runs it, through std::regex on the collapsed text:
//
//	[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?
//	|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:...)?
//	|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// A letter is "upper" (U: not a-z) or "lower" (L: not A-Z); a non-ASCII
// letter, collapsed to one category byte, is both. The first alternative
// is U*L+ with ECMAScript backtracking: the whole U run when a lower
// letter follows it, else up to the last non-ASCII letter of the run
// (which then is the L+), else no match; the second is U+L*.
func matchGPT4o(c []rune, i, s, e int) int {
	at := func(k int) byte { return colAt(c, k, e) }
	upper := func(k int) bool { b := at(k); return b == 0xD2 || (b >= 'A' && b <= 'Z') }
	lower := func(k int) bool { b := at(k); return b == 0xD2 || (b >= 'a' && b <= 'z') }
	contraction := func(k int) int {
		if at(k) != '\'' {
			return k
		}
		n, nn := at(k+1)|0x20, at(k+2)|0x20
		switch {
		case n == 's' || n == 't':
			return k + 2
		case (n == 'r' || n == 'v') && nn == 'e':
			return k + 3
		case n == 'm':
			return k + 2
		case n == 'l' && nn == 'l':
			return k + 3
		case n == 'd':
			return k + 2
		}
		return k
	}
	b := at(i)
	j := i
	if b != '\r' && b != '\n' && !cL(b) && !cN(b) && i < e {
		j = i + 1 // the optional leading character
	}
	// U*L+
	u := j
	for upper(u) {
		u++
	}
	if lower(u) {
		for lower(u) {
			u++
		}
		return contraction(u) - i
	}
	for k := u - 1; k >= j; k-- {
		if at(k) == 0xD2 {
			return contraction(k+1) - i
		}
	}
	// U+L*
	if upper(j) {
		u = j
		for upper(u) {
			u++
		}
		for lower(u) {
			u++
		}
		return contraction(u) - i
	}
	if cN(b) {
		n := 1
		for n < 3 && cN(at(i+n)) {
			n++
		}
		return n
	}
	other := func(k int) bool { x := at(k); return k < e && !cWS(x) && !cL(x) && !cN(x) }
	k := i
	if b == ' ' && other(i+1) {
		k++
	}
	if other(k) {
		for other(k) {
			k++
		}
		for x := at(k); k < e && (x == '\r' || x == '\n' || x == '/'); x = at(k) {
			k++
		}
		return k - i
	}
	// Whitespace: up to the last newline of the run, else the run but its
	// last character when something follows it, else the run.
	n, lastNL := 0, 0
	for i+n < e && cWS(at(i+n)) {
		if x := at(i + n); x == '\r' || x == '\n' {
			lastNL = n + 1
		}
		n++
	}
	switch {
	case lastNL > 0:
		return lastNL
	case n > 1 && i+n < e:
		return n - 1
	case n > 0:
		return n
	}
	return 1
}
