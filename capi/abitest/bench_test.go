package abitest

import "testing"

// The cost of one ABI round trip (fork check, handle lookup, busy flag,
// panic guard) on the cheapest call.
func BenchmarkCallOverhead(b *testing.B) {
	l := lib(b)
	m := openModel(b, l, stories)
	s := newSession(b, l, m, 64, 0)
	var pos uintptr
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if st := l.Position(s, &pos); st != OK {
			b.Fatal(l.LastError())
		}
	}
}

// One token through the ABI on stories260K, logits into a caller buffer.
func BenchmarkDecode(b *testing.B) {
	l := lib(b)
	m := openModel(b, l, stories)
	info := modelInfo(b, l, m)
	s := newSession(b, l, m, 256, 0)
	logits := make([]float32, info.NVocab)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%200 == 0 {
			l.Rewind(s, 0)
		}
		if st := l.Decode(s, 1, &logits[0], uintptr(len(logits))); st != OK {
			b.Fatal(l.LastError())
		}
	}
}
