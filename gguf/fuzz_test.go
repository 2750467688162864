package gguf

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/moonlm/moonlm/internal/shareddata"
)

// fuzzSeeds are writer outputs, the crafted hostile files and, when the
// shared test data is present, stories260K.
func fuzzSeeds(tb testing.TB) [][]byte {
	var seeds [][]byte
	w := NewWriter()
	for _, c := range roundTripValues {
		if err := w.Set(c.key, c.v); err != nil {
			tb.Fatal(err)
		}
	}
	if err := w.AddTensor("a", F32, []int64{4, 2}, make([]byte, 32)); err != nil {
		tb.Fatal(err)
	}
	if err := w.AddTensor("b", Q4_K, []int64{256}, make([]byte, 144)); err != nil {
		tb.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		tb.Fatal(err)
	}
	seeds = append(seeds, buf.Bytes())

	w = NewWriter()
	w.Version = 2
	_ = w.SetAlignment(8)
	_ = w.Set("tokenizer.ggml.tokens", []string{"<s>", "</s>", "a", "b"})
	_ = w.Set("n", Nested([]int8{1}, Nested([]string{"x"})))
	_ = w.AddTensor("x", F16, []int64{3}, make([]byte, 6))
	_ = w.AddTensor("y", I8, []int64{5}, make([]byte, 5))
	buf.Reset()
	if _, err := w.WriteTo(&buf); err != nil {
		tb.Fatal(err)
	}
	seeds = append(seeds, buf.Bytes())

	for _, c := range hostileCases() {
		seeds = append(seeds, c.data)
	}
	if root := shareddata.Root(); root != "" {
		if b, err := os.ReadFile(filepath.Join(root, "models", "stories260K.gguf")); err == nil {
			seeds = append(seeds, b)
		}
	}
	return seeds
}

// FuzzOpen parses arbitrary bytes. A bad file must give an error classified
// as ErrFormat or ErrUnsupported; a good one must decode every value, expose
// in-bounds tensors, and survive a rewrite through the Writer unchanged.
func FuzzOpen(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		gf, err := Parse(data)
		if err != nil {
			if !errors.Is(err, ErrFormat) && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("unclassified error: %v", err)
			}
			return
		}
		checkFile(t, gf, data)

		// Rewrite: everything the reader accepted the writer must accept,
		// and the result must read back the same.
		w := NewWriter()
		w.Version = gf.Version
		for _, k := range gf.Keys() {
			v, _ := gf.Lookup(k)
			if err := w.Set(k, v); err != nil {
				t.Fatalf("rewrite key %q: %v", k, err)
			}
		}
		for _, tn := range gf.Tensors() {
			if err := w.AddTensor(tn.Name, tn.Type, tn.Shape, tn.Data); err != nil {
				t.Fatalf("rewrite tensor %q: %v", tn.Name, err)
			}
		}
		var buf bytes.Buffer
		if _, err := w.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		g2, err := Parse(buf.Bytes())
		if err != nil {
			t.Fatalf("re-read of rewrite: %v", err)
		}
		if len(g2.Keys()) != len(gf.Keys()) || len(g2.Tensors()) != len(gf.Tensors()) || g2.Alignment != gf.Alignment {
			t.Fatalf("rewrite changed the file: %d/%d keys, %d/%d tensors, alignment %d/%d",
				len(g2.Keys()), len(gf.Keys()), len(g2.Tensors()), len(gf.Tensors()), g2.Alignment, gf.Alignment)
		}
		for i, k := range gf.Keys() {
			a, _ := gf.Lookup(k)
			b, _ := g2.Lookup(g2.Keys()[i])
			if g2.Keys()[i] != k || a.Type() != b.Type() || !bytes.Equal(a.Raw(), b.Raw()) {
				t.Fatalf("rewrite changed key %q", k)
			}
		}
		for i, a := range gf.Tensors() {
			b := g2.Tensors()[i]
			if a.Name != b.Name || a.Type != b.Type || !bytes.Equal(a.Data, b.Data) {
				t.Fatalf("rewrite changed tensor %q", a.Name)
			}
		}
	})
}

// checkFile decodes every value and touches every tensor.
func checkFile(t *testing.T, f *File, data []byte) {
	t.Helper()
	if f.Alignment <= 0 || f.Alignment&(f.Alignment-1) != 0 || f.DataOffset%f.Alignment != 0 {
		t.Fatalf("bad alignment %d or data offset %d", f.Alignment, f.DataOffset)
	}
	for _, k := range f.Keys() {
		v, ok := f.Lookup(k)
		if !ok {
			t.Fatalf("key %q listed but not found", k)
		}
		checkValue(t, v)
	}
	var sum byte
	for _, tn := range f.Tensors() {
		if got, ok := f.Tensor(tn.Name); !ok || got != tn {
			t.Fatalf("tensor %q not found by name", tn.Name)
		}
		if tn.Offset < f.DataOffset || tn.Offset+int64(len(tn.Data)) > int64(len(data)) {
			t.Fatalf("tensor %q [%d,+%d) outside the data section", tn.Name, tn.Offset, len(tn.Data))
		}
		if (tn.Offset-f.DataOffset)%f.Alignment != 0 {
			t.Fatalf("tensor %q misaligned", tn.Name)
		}
		n := int64(1)
		for _, d := range tn.Shape {
			n *= d
		}
		if rb, err := tn.Type.RowBytes(tn.Shape[0]); err != nil || rb*(n/tn.Shape[0]) != int64(len(tn.Data)) {
			t.Fatalf("tensor %q: %d bytes for %s%v (%v)", tn.Name, len(tn.Data), tn.Type, tn.Shape, err)
		}
		if len(tn.Data) > 0 {
			sum += tn.Data[0] + tn.Data[len(tn.Data)-1]
		}
	}
	_ = sum
}

func checkValue(t *testing.T, v Value) {
	t.Helper()
	// Errors are allowed (bad UTF-8, bool byte 2); panics are not.
	_, _ = v.Interface()
	_, _ = v.String()
	_, _ = v.Uint64()
	_, _ = v.Int64()
	_, _ = v.Float64()
	_, _ = v.Bool()
	a, err := v.Array()
	if v.Type() != ValueArray {
		if err == nil {
			t.Fatalf("Array() of a %s succeeded", v.Type())
		}
		return
	}
	if err != nil {
		t.Fatalf("Array(): %v", err)
	}
	if a.ElemType() == ValueString {
		n := 0
		if err := a.ForEachString(func(i int, b []byte) error {
			if want, err := a.StringBytes(i); err != nil || !bytes.Equal(want, b) {
				t.Fatalf("ForEachString %d: %q, StringBytes %q (%v)", i, b, want, err)
			}
			n++
			return nil
		}); err != nil || n != a.Len() {
			t.Fatalf("ForEachString: %d of %d strings: %v", n, a.Len(), err)
		}
	}
	for i := 0; i < a.Len(); i++ {
		e, err := a.Index(i)
		if err != nil {
			t.Fatalf("element %d: %v", i, err)
		}
		if a.ElemType() == ValueString {
			b, err := a.StringBytes(i)
			if err != nil {
				t.Fatalf("StringBytes(%d): %v", i, err)
			}
			_ = b
		}
		checkValue(t, e)
	}
	if _, err := a.Index(a.Len()); err == nil {
		t.Fatal("index past the end succeeded")
	}
}
